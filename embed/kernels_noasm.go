//go:build !amd64 || purego

package embed

const (
	haveFMA  = false
	haveF16C = false
)

func gemm6x16(k int, x *float32, xstride int, w *float32, acc *[96]float32) {
	panic("embed: gemm6x16 without assembly")
}

func gemm6x16h(k int, x *float32, xstride int, w *uint16, acc *[96]float32) {
	panic("embed: gemm6x16h without assembly")
}

func gemm4x16h(k int, x *float32, xstride int, w *uint16, acc *[96]float32) {
	panic("embed: gemm4x16h without assembly")
}
