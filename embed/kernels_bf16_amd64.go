//go:build amd64 && !purego

package embed

import "golang.org/x/sys/cpu"

// haveBF16 selects the AVX512_BF16 kernels (VDPBF16PS) in
// kernels_bf16_amd64.s.
var haveBF16 = haveAVX512 && cpu.X86.HasAVX512BF16

// gemm8x32bf is the bf16 kernel: 8 rows × 32 columns over a pair of bf16 panels
// with the epilogue of store16 (bias, residual, ReLU) for the first m rows;
// see kernels_bf16_amd64.s.
//
//go:noescape
func gemm8x32bf(k int, x *uint32, xstride int, w *uint16, dst *float32, dstride int, bias, res *float32, m int, relu bool)

// gemm4x32bf is gemm8x32bf for 4 rows.
//
//go:noescape
func gemm4x32bf(k int, x *uint32, xstride int, w *uint16, dst *float32, dstride int, bias, res *float32, m int, relu bool)

// cvtBF16 rounds n floats (n a multiple of 32) to bf16, stored two per
// uint32 in order.
//
//go:noescape
func cvtBF16(dst *uint32, src *float32, n int)
