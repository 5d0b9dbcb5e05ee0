package embedded

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotMatchesGeneric checks the dispatching dot (the AVX2 kernel where the
// CPU has it) against the portable loop for every length around the
// kernel's 32- and 8-wide steps.
func TestDotMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 70; n++ {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = r.Float32()*2-1, r.Float32()*2-1
		}
		got, want := dot(a, b), dotGeneric(a, b)
		if math.Abs(float64(got-want)) > 1e-4 {
			t.Errorf("n=%d: dot = %v, want %v", n, got, want)
		}
	}
	a := make([]float32, 512)
	for i := range a {
		a[i] = 1 / float32(math.Sqrt(512))
	}
	if got := dot(a, a); math.Abs(float64(got-1)) > 1e-5 {
		t.Errorf("unit vector with itself: %v, want 1", got)
	}
}
