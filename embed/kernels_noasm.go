//go:build !amd64 || purego

package embed

const (
	haveFMA    = false
	haveF16C   = false
	haveAVX512 = false
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

func gemm8x32h(k int, x *float32, xstride int, w0, w1 *uint16, acc *[256]float32) {
	panic("embed: gemm8x32h without assembly")
}
