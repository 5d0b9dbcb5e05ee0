//go:build amd64 && !purego

package embedded

import "unsafe"

// dotHalfAVX2 is implemented in dot_amd64.s.
//
//go:noescape
func dotHalfAVX2(a *float32, b *uint16, n int) float32

// prefetchLines is implemented in dot_amd64.s: PREFETCHT0 each 64-byte line
// of n bytes from p.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n int)

func cpuidECX1() uint32

// toHalfF16C is implemented in dot_amd64.s.
//
//go:noescape
func toHalfF16C(dst *uint16, src *float32, n int)

// toHalf converts src to binary16 into dst (same length), as f32ToF16 does.
func toHalf(dst []uint16, src []float32) {
	if len(src) == 0 {
		return
	}
	if halfKernel {
		dst = dst[:len(src)]
		toHalfF16C(&dst[0], &src[0], len(src))
		return
	}
	toHalfGeneric(dst, src)
}

// halfKernel: AVX2 and FMA, and F16C (CPUID leaf 1, ECX bit 29; x/sys/cpu
// does not expose it) for VCVTPH2PS.
var halfKernel = haveAVX2FMA && cpuidECX1()&(1<<29) != 0

// dotHalf returns the dot product of a and the half vector b (same length).
func dotHalf(a []float32, b []uint16) float32 {
	if len(a) == 0 {
		return 0
	}
	if halfKernel {
		b = b[:len(a)]
		return dotHalfAVX2(&a[0], &b[0], len(a))
	}
	return dotHalfGeneric(a, b)
}

// prefetch asks the CPU to start loading the n bytes at p into cache.
func prefetch(p unsafe.Pointer, n int) { prefetchLines(p, n) }
