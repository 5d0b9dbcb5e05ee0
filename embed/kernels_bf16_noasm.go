//go:build !amd64 || purego

package embed

const haveBF16 = false

func gemm8x32bf(k int, x *uint32, xstride int, w *uint16, dst *float32, dstride int, bias, res *float32, m int, relu bool) {
	panic("embed: gemm8x32bf without assembly")
}

func gemm4x32bf(k int, x *uint32, xstride int, w *uint16, dst *float32, dstride int, bias, res *float32, m int, relu bool) {
	panic("embed: gemm4x32bf without assembly")
}

func cvtBF16(dst *uint32, src *float32, n int) {
	panic("embed: cvtBF16 without assembly")
}
