//go:build amd64 && !purego

package embed

import "golang.org/x/sys/cpu"

// haveFMA selects the AVX2+FMA micro-kernels in kernels_amd64.s; haveF16C
// additionally lets them read half-float weights directly. Build with
// -tags purego to force the portable Go kernel.
var (
	haveFMA  = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	haveF16C = haveFMA && cpuidECX1()&(1<<29) != 0
	// haveAVX512 selects gemm8x32h for half-float weights; x/sys/cpu
	// reports AVX-512 only when the OS saves the ZMM state.
	haveAVX512 = haveF16C && cpu.X86.HasAVX512F
)

// gemm6x16 computes a 6-row × 16-column tile; see kernels_amd64.s.
//
//go:noescape
func gemm6x16(k int, x *float32, xstride int, w *float32, acc *[96]float32)

// gemm6x16h is gemm6x16 with a half-float weight panel.
//
//go:noescape
func gemm6x16h(k int, x *float32, xstride int, w *uint16, acc *[96]float32)

// gemm4x16h is gemm6x16h for 4 rows.
//
//go:noescape
func gemm4x16h(k int, x *float32, xstride int, w *uint16, acc *[96]float32)

// gemm8x32h is the AVX-512 kernel: 8 rows × 32 columns over two panels.
//
//go:noescape
func gemm8x32h(k int, x *float32, xstride int, w0, w1 *uint16, acc *[256]float32)

func cpuidECX1() uint32
