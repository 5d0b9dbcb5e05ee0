package embedded

import "math"

// dotGeneric returns the dot product of a and b, which must have the same length.
// Vectors are stored L2-normalised, so this is their cosine similarity.
//
// Eight independent accumulators let the CPU overlap the floating-point adds
// (a single accumulator serialises on add latency); advancing both slices
// by eight under a length test lets the compiler drop every bounds check in
// the loop (checked with -gcflags=-d=ssa/check_bce).
func dotGeneric(a, b []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for ; len(a) >= 8 && len(b) >= 8; a, b = a[8:], b[8:] {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		s4 += a[4] * b[4]
		s5 += a[5] * b[5]
		s6 += a[6] * b[6]
		s7 += a[7] * b[7]
	}
	b = b[:len(a)]
	for i := range a {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// normalize returns v scaled to unit length, copying it. A zero vector is
// returned as a zero copy (it scores 0 against everything).
func normalize(v []float32) []float32 {
	out := make([]float32, len(v))
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return out
	}
	inv := 1 / math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// isUnit reports whether v is L2-normalised closely enough to be used as is.
func isUnit(v []float32) bool {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	return math.Abs(n-1) < 1e-5
}
