//go:build amd64 && !purego

package embed

import "golang.org/x/sys/cpu"

// haveFMA selects the AVX2+FMA micro-kernels in kernels_amd64.s; haveF16C
// additionally lets them read half-float weights directly. Build with
// -tags purego to force the portable Go kernel.
var (
	haveFMA  = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	haveF16C = haveFMA && cpuidECX1()&(1<<29) != 0
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

func cpuidECX1() uint32
