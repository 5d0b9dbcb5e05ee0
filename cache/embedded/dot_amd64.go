//go:build amd64 && !purego

package embedded

import "golang.org/x/sys/cpu"

// dotAVX2 is implemented in dot_amd64.s.
//
//go:noescape
func dotAVX2(a, b *float32, n int) float32

var haveAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dot returns the dot product of a and b (same length). Vectors are stored
// L2-normalised, so this is their cosine similarity. It is the inner loop of
// every search: the AVX2+FMA kernel does 8 multiply-adds per instruction
// where scalar Go does one (BenchmarkDot512), the same trade the encoder
// makes in embed/kernels_amd64.s; -tags purego keeps the portable loop.
func dot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	if haveAVX2FMA {
		b = b[:len(a)]
		return dotAVX2(&a[0], &b[0], len(a))
	}
	return dotGeneric(a, b)
}
