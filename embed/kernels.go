package embed

// tileRows is the number of input rows the packed kernel reads at once.
// Activation buffers passed to apply must hold n rounded up to a multiple
// of tileRows rows (the extra rows are read and their results dropped).
const tileRows = 6

// linear is y = x·W + b with W stored [in][out] in the model file. At load
// the kernel is repacked for whichever micro-kernel this machine runs:
//   - with AVX2+FMA: panels of 16 output columns, [out/16][in][16], so the
//     assembly kernel streams one contiguous panel while it accumulates a
//     6 × 16 tile in registers and each panel is read once per text;
//   - otherwise W transposed, [out][in], so that every output is a
//     contiguous dot product over the input row (4 rows × 2 outputs per pass).
//
// With AVX512_BF16 the model may instead be packed as bf16 panels
// (newLinearBF16, kernels_bf16.go).
//
// Half-float weights (the shipped file) stay half in memory when the CPU
// has F16C: the kernel widens them as it streams them, which halves both the
// resident size and the memory traffic per text.
type linear struct {
	in, out int
	wh      []uint16  // packed half-float panels (AVX2+FMA+F16C), or nil
	wp      []float32 // packed panels (AVX2+FMA), or nil
	wt      []float32 // [out][in] (portable kernel), or nil
	wb      []uint16  // packed bf16 k-pair panels (AVX512_BF16), or nil
	b       []float32 // [out]
}

// newLinear packs W ([in][out]), given as float32 w or as half floats wh
// (one of them non-nil).
func newLinear(w []float32, wh []uint16, b []float32, in, out int) *linear {
	l := &linear{in: in, out: out, b: b}
	if haveF16C && wh != nil && out%16 == 0 {
		l.wh = make([]uint16, in*out)
		for p := range out / 16 {
			panel := l.wh[p*in*16 : (p+1)*in*16]
			for k := range in {
				copy(panel[k*16:k*16+16], wh[k*out+p*16:k*out+p*16+16])
			}
		}
		return l
	}
	if w == nil {
		w = make([]float32, len(wh))
		for i, h := range wh {
			w[i] = f16ToF32(h)
		}
	}
	if haveFMA && out%16 == 0 {
		l.wp = make([]float32, in*out)
		for p := range out / 16 {
			panel := l.wp[p*in*16 : (p+1)*in*16]
			for k := range in {
				copy(panel[k*16:k*16+16], w[k*out+p*16:k*out+p*16+16])
			}
		}
		return l
	}
	l.wt = make([]float32, in*out)
	for k := range in {
		row := w[k*out : k*out+out]
		for j, v := range row {
			l.wt[j*in+k] = v
		}
	}
	return l
}

// bytes is the resident size of the packed weights and bias.
func (l *linear) bytes() int64 {
	return 2*int64(len(l.wh)+len(l.wb)) + 4*int64(len(l.wp)+len(l.wt)+len(l.b))
}

// apply computes dst[t] = x[t]·W + b (+ res[t]) (then ReLU if relu) for n
// rows. res may be nil and must not alias dst. s holds the bf16 kernel's
// converted input; nil allocates it.
func (l *linear) apply(dst, x []float32, n int, res []float32, relu bool, s *scratch) {
	if l.wb != nil {
		l.applyBF16(dst, x, n, res, relu, s)
		return
	}
	if l.wp != nil || l.wh != nil {
		l.applyPacked(dst, x, n, res, relu)
		return
	}
	in, out := l.in, l.out
	t := 0
	for ; t+4 <= n; t += 4 {
		x0 := x[t*in : t*in+in]
		x1 := x[(t+1)*in : (t+1)*in+in]
		x2 := x[(t+2)*in : (t+2)*in+in]
		x3 := x[(t+3)*in : (t+3)*in+in]
		for j := 0; j < out; j += 2 {
			w0 := l.wt[j*in : j*in+in]
			w1 := l.wt[(j+1)*in : (j+1)*in+in]
			s := dot4x2(x0, x1, x2, x3, w0, w1)
			b0, b1 := l.b[j], l.b[j+1]
			for r := range 4 {
				o := (t+r)*out + j
				v0, v1 := s[2*r]+b0, s[2*r+1]+b1
				if res != nil {
					v0 += res[o]
					v1 += res[o+1]
				}
				if relu {
					v0, v1 = max(v0, 0), max(v1, 0)
				}
				dst[o], dst[o+1] = v0, v1
			}
		}
	}
	for ; t < n; t++ {
		xt := x[t*in : t*in+in]
		for j := 0; j < out; j++ {
			v := dotSeq(xt, l.wt[j*in:j*in+in]) + l.b[j]
			o := t*out + j
			if res != nil {
				v += res[o]
			}
			if relu {
				v = max(v, 0)
			}
			dst[o] = v
		}
	}
}

// dot4x2 returns the 8 dot products of rows x0..x3 with w0, w1, ordered
// x0·w0, x0·w1, x1·w0, …. Eight accumulators plus six operands fit the 15
// usable SSE registers, so each loaded weight is used four times.
func dot4x2(x0, x1, x2, x3, w0, w1 []float32) [8]float32 {
	n := len(x0)
	x1, x2, x3, w0, w1 = x1[:n], x2[:n], x3[:n], w0[:n], w1[:n]
	var s00, s01, s10, s11, s20, s21, s30, s31 float32
	for k := range x0 {
		a, b := w0[k], w1[k]
		v0, v1, v2, v3 := x0[k], x1[k], x2[k], x3[k]
		s00 += v0 * a
		s01 += v0 * b
		s10 += v1 * a
		s11 += v1 * b
		s20 += v2 * a
		s21 += v2 * b
		s30 += v3 * a
		s31 += v3 * b
	}
	return [8]float32{s00, s01, s10, s11, s20, s21, s30, s31}
}

// dotSeq returns x·y summed in order with one accumulator, the chain
// dot4x2 runs for each of its outputs, so that a row's result does not
// depend on whether it falls into a group of four (a text embedded alone
// gets the vector it gets in a batch).
func dotSeq(x, y []float32) float32 {
	y = y[:len(x)]
	var s float32
	for k, v := range x {
		s += v * y[k]
	}
	return s
}

// dotUnitary returns x·y over len(x) elements with four accumulators.
func dotUnitary(x, y []float32) float32 {
	n := len(x)
	y = y[:n]
	var s0, s1, s2, s3 float32
	k := 0
	for ; k+4 <= n; k += 4 {
		s0 += x[k] * y[k]
		s1 += x[k+1] * y[k+1]
		s2 += x[k+2] * y[k+2]
		s3 += x[k+3] * y[k+3]
	}
	for ; k < n; k++ {
		s0 += x[k] * y[k]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpyUnitary computes y += a·x.
func axpyUnitary(a float32, x, y []float32) {
	y = y[:len(x)]
	for k, v := range x {
		y[k] += a * v
	}
}

// applyPacked is apply for the AVX2+FMA kernel: panel-outer, token-inner, so
// a panel (in×16 floats, 32–96 KB) stays in L1/L2 for all token tiles.
func (l *linear) applyPacked(dst, x []float32, n int, res []float32, relu bool) {
	in, out := l.in, l.out
	if x = x[:cap(x)]; len(x) < (n+tileRows-1)*in {
		panic("embed: activation buffer not padded with tileRows-1 rows")
	}
	dst = dst[:n*out]
	if res != nil {
		res = res[:n*out]
	}
	if haveAVX512 && l.wh != nil && out%32 == 0 {
		l.applyPacked512(dst, x, n, res, relu)
		return
	}
	var acc [tileRows * 16]float32
	for p := range out / 16 {
		for t := 0; t < n; t += tileRows {
			l.tile16(p, t, x, n, &acc)
			for r := range min(tileRows, n-t) {
				o := (t+r)*out + p*16
				l.store16(dst, res, o, acc[r*16:r*16+16], p*16, relu)
			}
		}
	}
}

// tile16 computes rows t.. (up to tileRows of them) of panel p into acc
// with the AVX2 kernels.
func (l *linear) tile16(p, t int, x []float32, n int, acc *[tileRows * 16]float32) {
	in := l.in
	switch {
	case l.wh != nil && n-t <= 4:
		gemm4x16h(in, &x[t*in], in, &l.wh[p*in*16], acc)
	case l.wh != nil:
		gemm6x16h(in, &x[t*in], in, &l.wh[p*in*16], acc)
	default:
		gemm6x16(in, &x[t*in], in, &l.wp[p*in*16], acc)
	}
}

// store16 writes one row's 16 columns from col: acc + bias (+ res), ReLU'd
// if relu.
func (l *linear) store16(dst, res []float32, o int, a []float32, col int, relu bool) {
	d := dst[o : o+16]
	a = a[:16]
	bias := l.b[col : col+16]
	if res != nil {
		rr := res[o : o+16]
		for c := range d {
			d[c] = a[c] + bias[c] + rr[c]
		}
	} else {
		for c := range d {
			d[c] = a[c] + bias[c]
		}
	}
	if relu {
		for c, v := range d {
			d[c] = max(v, 0)
		}
	}
}

// applyPacked512 runs 8-row tiles of two panels through the AVX-512 kernel
// and the last n%8 rows through the AVX2 ones. Every element is the same
// chain of fused multiply-adds either way, so results do not depend on how
// rows fall into tiles (a text embedded alone or in a batch gets the same
// vector). The tail tiles start at a multiple of 8 and read at most 3 rows
// past n, within the tileRows-1 spare rows.
func (l *linear) applyPacked512(dst, x []float32, n int, res []float32, relu bool) {
	in, out := l.in, l.out
	full := n &^ 7
	var acc [8 * 32]float32
	var acc6 [tileRows * 16]float32
	for p := 0; p < out/16; p += 2 {
		w0, w1 := &l.wh[p*in*16], &l.wh[(p+1)*in*16]
		for t := 0; t < full; t += 8 {
			gemm8x32h(in, &x[t*in], in, w0, w1, &acc)
			for r := range 8 {
				o := (t+r)*out + p*16
				l.store16(dst, res, o, acc[r*32:r*32+16], p*16, relu)
				l.store16(dst, res, o+16, acc[r*32+16:r*32+32], p*16+16, relu)
			}
		}
		for q := p; q < p+2; q++ {
			for t := full; t < n; t += tileRows {
				l.tile16(q, t, x, n, &acc6)
				for r := range min(tileRows, n-t) {
					l.store16(dst, res, (t+r)*out+q*16, acc6[r*16:r*16+16], q*16, relu)
				}
			}
		}
	}
}
