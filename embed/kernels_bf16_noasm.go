//go:build !amd64 || purego

package embed

const haveBF16 = false

func gemm8x32bf(k int, x *uint32, xstride int, w0, w1 *uint16, acc *[256]float32) {
	panic("embed: gemm8x32bf without assembly")
}

func gemm4x32bf(k int, x *uint32, xstride int, w0, w1 *uint16, acc *[256]float32) {
	panic("embed: gemm4x32bf without assembly")
}
