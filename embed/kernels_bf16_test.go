package embed

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBF16Round(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0xbf800000, 0xbf80}, // -1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up to even
		{0x3f808001, 0x3f81}, // above the tie
		{0x3f807fff, 0x3f80}, // below the tie
		{0x7f7fffff, 0x7f80}, // max float32 rounds to +Inf
		{0x7f800000, 0x7f80}, // +Inf
		{0x00000001, 0x0000}, // subnormal reads as zero
		{0x807fffff, 0x8000}, // negative subnormal: -0
		{0x00800000, 0x0080}, // smallest normal
		{0x7fc00000, 0x7fc0}, // quiet NaN
	} {
		if got := f32ToBF16(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("f32ToBF16(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if got := f32ToBF16(math.Float32frombits(0x7f800001)); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("f32ToBF16(signalling NaN) = %#04x, not a NaN", got)
	}
	if bf16ToF32(0x3f80) != 1 || bf16ToF32(0xc040) != -3 {
		t.Errorf("bf16ToF32 is not the top half of a float32")
	}
}

// bf16Dot emulates one output element of the VDPBF16PS kernels: over the
// k-pairs in order, the odd product then the even one, each added to the
// fp32 accumulator with one rounding (products of two bf16 are exact in
// float32), subnormal results flushed to zero (Intel SDM, VDPBF16PS).
func bf16Dot(x, w []uint16) float32 {
	var acc float32
	for i := 0; i < len(x); i += 2 {
		for _, e := range []int{i + 1, i} {
			p := float64(bf16ToF32(x[e])) * float64(bf16ToF32(w[e]))
			acc = float32(float64(acc) + p)
			if math.Abs(float64(acc)) < 0x1p-126 {
				acc = 0
			}
		}
	}
	return acc
}

// TestBF16Kernels checks the VDPBF16PS kernels (both tile heights, odd
// input widths, one to three pairs of panels) against bf16Dot and store16's
// epilogue, to 1e-5 of the sum of the terms' magnitudes.
func TestBF16Kernels(t *testing.T) {
	if !haveBF16 {
		t.Skip("this CPU (or a purego build) has no AVX512_BF16 kernel (no variable enables it: it runs wherever the CPU has the feature)")
	}
	rng := rand.New(rand.NewPCG(7, 11))
	exact, total := 0, 0
	for _, shape := range [][2]int{{1, 32}, {2, 64}, {37, 32}, {64, 96}, {255, 64}, {512, 32}} {
		in, out := shape[0], shape[1]
		w := make([]float32, in*out)
		for i := range w {
			w[i] = float32(rng.NormFloat64() * 0.1)
		}
		bias := make([]float32, out)
		for j := range bias {
			bias[j] = float32(rng.NormFloat64())
		}
		l := newLinearBF16(w, nil, bias, in, out)
		for _, n := range []int{1, 3, 4, 5, 7, 8, 9, 12, 13, 16, 21} {
			x := make([]float32, n*in)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			res := make([]float32, n*out)
			for i := range res {
				res[i] = float32(rng.NormFloat64())
			}
			for _, relu := range []bool{false, true} {
				// Rows past n of the last tile must not be stored: a
				// guard band after dst stays NaN.
				buf := make([]float32, (n+8)*out)
				for i := range buf {
					buf[i] = float32(math.NaN())
				}
				got := buf[:n*out]
				l.apply(got, x, n, res, relu, nil)
				for i, v := range buf[n*out:] {
					if !math.IsNaN(float64(v)) {
						t.Fatalf("in=%d out=%d n=%d: wrote %v past the last row (offset %d)", in, out, n, v, i)
					}
				}
				for r := range n {
					xr := make([]uint16, in+in%2)
					for k := range in {
						xr[k] = f32ToBF16(x[r*in+k])
					}
					for j := range out {
						wc := make([]uint16, in+in%2)
						var mag float64
						for k := range in {
							wc[k] = f32ToBF16(w[k*out+j])
							mag += math.Abs(float64(bf16ToF32(xr[k])) * float64(bf16ToF32(wc[k])))
						}
						want := bf16Dot(xr, wc) + bias[j] + res[r*out+j]
						if relu {
							want = max(want, 0)
						}
						g := got[r*out+j]
						total++
						if g == want {
							exact++
						}
						mag += math.Abs(float64(bias[j])) + math.Abs(float64(res[r*out+j]))
						if d := math.Abs(float64(g - want)); d > 1e-5*mag {
							t.Fatalf("in=%d out=%d n=%d relu=%v [%d,%d] = %v, want %v (|diff| %.3g, bound %.3g)",
								in, out, n, relu, r, j, g, want, d, 1e-5*mag)
						}
					}
				}
			}
		}
	}
	t.Logf("%d of %d elements bit-exact to the emulation", exact, total)
}

// TestBF16Convert checks the VCVTNE2PS2BF16 path of bf16Pairs against
// f32ToBF16 on random bit patterns (all classes: subnormals, NaNs, ties)
// and on a tail that is not a multiple of 32.
func TestBF16Convert(t *testing.T) {
	if !haveBF16 {
		t.Skip("this CPU (or a purego build) has no AVX512_BF16 kernel (no variable enables it: it runs wherever the CPU has the feature)")
	}
	rng := rand.New(rand.NewPCG(3, 5))
	const n = 4096 + 6
	x := make([]float32, n)
	for i := range x {
		b := rng.Uint32()
		switch i % 4 {
		case 1:
			b &= 0x807fffff // subnormal or zero
		case 2:
			b = b&^0xffff | 0x8000 // a tie
		}
		x[i] = math.Float32frombits(b)
	}
	got := make([]uint32, n/2)
	bf16Pairs(got, x, 1, n)
	for i, p := range got {
		for e, h := range []uint16{uint16(p), uint16(p >> 16)} {
			want := f32ToBF16(x[2*i+e])
			if h != want && !(h&0x7fff > 0x7f80 && want&0x7fff > 0x7f80) {
				t.Fatalf("bf16 of %#08x = %#04x, want %#04x", math.Float32bits(x[2*i+e]), h, want)
			}
		}
	}
}

// BenchmarkBF16Kernel is gemm8x32bf alone on an L1-resident panel pair
// (64 k-pairs): ns/dp is the time per VDPBF16PS (32 multiply-adds).
func BenchmarkBF16Kernel(b *testing.B) {
	if !haveBF16 {
		b.Skip("this CPU (or a purego build) has no AVX512_BF16 kernel (no variable enables it: it runs wherever the CPU has the feature)")
	}
	const kp = 64
	w := make([]uint16, kp*64)
	x := make([]uint32, 8*kp)
	dst := make([]float32, 8*32)
	bias := make([]float32, 32)
	b.ReportAllocs()
	for b.Loop() {
		gemm8x32bf(kp, &x[0], kp, &w[0], &dst[0], 32, &bias[0], nil, 8, false)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(kp*16), "ns/dp")
}
