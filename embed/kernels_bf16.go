package embed

import "math"

// The bf16 path (AVX512_BF16): weights are packed at load as bfloat16 —
// the top half of a float32, 8 bits of mantissa — in pairs of panels of 16
// output columns × 2 consecutive inputs, [out/32][⌈in/2⌉][2][16][2], so
// that one ZMM load holds a k-pair of 16 columns and the kernel streams one
// contiguous block per 32 columns. Each linear call converts its input
// rows once to bf16 pairs (one uint32 per pair, low half the even input)
// and VDPBF16PS multiplies a broadcast pair into 16 fp32 accumulators: 32
// multiply-adds per instruction against 16 for VFMADD231PS over widened
// half floats. An odd input width is padded with a zero weight and a zero
// activation. The results differ from the fp32 kernels by about 1e-3
// relative per element (bf16 rounding of both operands).

// f32ToBF16 rounds f to the nearest bfloat16, ties to even. Zeros and
// subnormals become signed zero, as VDPBF16PS reads subnormal inputs as
// zero (Intel SDM, VDPBF16PS: "DAZ"); NaN stays a quiet NaN.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	switch {
	case b&0x7f800000 == 0:
		return uint16(b>>16) & 0x8000
	case b&0x7fffffff > 0x7f800000:
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// bf16ToF32 widens a bfloat16 exactly.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// newLinearBF16 packs W ([in][out], float32 w or half floats wh) as bf16
// panels for the VDPBF16PS kernels. It returns nil when this machine or
// the shape (out not a multiple of 32) cannot use them.
func newLinearBF16(w []float32, wh []uint16, b []float32, in, out int) *linear {
	if !haveBF16 || out%32 != 0 {
		return nil
	}
	kp := (in + 1) / 2
	l := &linear{in: in, out: out, b: b, wb: make([]uint16, kp*2*out)}
	for p := range out / 32 {
		for k := range in {
			d := l.wb[p*kp*64+(k/2)*64+k%2:][:63]
			if w != nil {
				for c, v := range w[k*out+p*32 : k*out+p*32+32] {
					d[2*c] = f32ToBF16(v)
				}
			} else {
				for c, h := range wh[k*out+p*32 : k*out+p*32+32] {
					d[2*c] = f32ToBF16(f16ToF32(h))
				}
			}
		}
	}
	return l
}

// bf16Pairs converts n rows of width in to bf16 pairs, ⌈in/2⌉ per row,
// the last one padded with zero when in is odd. With an even width the
// pairs are the floats in order, converted 32 at a time by cvtBF16.
func bf16Pairs(dst []uint32, x []float32, n, in int) {
	kp := (in + 1) / 2
	if in%2 == 0 {
		total := n * in
		done := total &^ 31
		if done > 0 {
			cvtBF16(&dst[0], &x[0], done)
		}
		for i := done / 2; i < total/2; i++ {
			dst[i] = uint32(f32ToBF16(x[2*i])) | uint32(f32ToBF16(x[2*i+1]))<<16
		}
		return
	}
	for t := range n {
		row := x[t*in : t*in+in]
		d := dst[t*kp : t*kp+kp]
		for i := range in / 2 {
			d[i] = uint32(f32ToBF16(row[2*i])) | uint32(f32ToBF16(row[2*i+1]))<<16
		}
		d[kp-1] = uint32(f32ToBF16(row[in-1]))
	}
}

// pairs returns the scratch for n rows of bf16 pairs, allocated on first
// use for the widest input (the FFN's second layer) of a full batch.
func (s *scratch) pairs(n int) []uint32 {
	if cap(s.xb) < n {
		s.xb = make([]uint32, max(n, (maxBatchRows+7)*((ffnDim+1)/2)))
	}
	return s.xb[:n]
}

// applyBF16 is apply for bf16 panels: 8-row tiles of a pair of panels through
// gemm8x32bf, a last tile of 4 or fewer rows through gemm4x32bf; both add
// bias, residual and ReLU as they store (store16's arithmetic) and run the
// same chain of VDPBF16PS per element, so a text's vector does not depend
// on how its rows fall into tiles (alone or in a batch). Rows of the last
// tile past n are zero pairs in the scratch and are not stored.
func (l *linear) applyBF16(dst, x []float32, n int, res []float32, relu bool, s *scratch) {
	in, out, kp := l.in, l.out, (l.in+1)/2
	rows := (n + 7) &^ 7
	var xb []uint32
	if s != nil {
		xb = s.pairs(rows * kp)
	} else {
		xb = make([]uint32, rows*kp)
	}
	bf16Pairs(xb, x[:n*in], n, in)
	clear(xb[n*kp:])
	dst = dst[:n*out]
	if res != nil {
		res = res[:n*out]
	}
	for p := range out / 32 {
		w, bias := &l.wb[p*kp*64], &l.b[p*32]
		for t := 0; t < n; t += 8 {
			o := t*out + p*32
			var r *float32
			if res != nil {
				r = &res[o]
			}
			if m := n - t; m <= 4 {
				gemm4x32bf(kp, &xb[t*kp], kp, w, &dst[o], out, bias, r, m, relu)
			} else {
				gemm8x32bf(kp, &xb[t*kp], kp, w, &dst[o], out, bias, r, min(m, 8), relu)
			}
		}
	}
}
