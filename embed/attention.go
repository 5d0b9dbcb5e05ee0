package embed

import "math"

// attention runs scaled dot-product attention over all n tokens for
// numHeads heads. qkv rows are [q | k | v], each of width w; dst is n × w.
// q is scaled in place first, as the graph does (MultiheadAttention/mul).
func attention(dst, qkv []float32, n, w int, scale float32, s *scratch) {
	if haveFMA {
		attentionPacked(dst, qkv, n, w, scale, s)
		return
	}
	attentionGo(dst, qkv, n, w, scale, s.p)
}

// attentionPacked runs both attention products through the 6×16 FMA kernel:
// per head, K is packed as a [keys/16][dh][16] "weight" for Q·Kᵀ and V as
// [dh/16][keys][16] for P·V.
func attentionPacked(dst, qkv []float32, n, w int, scale float32, s *scratch) {
	dh := w / numHeads
	stride := 3 * w
	npad := (n + 15) &^ 15
	scaleQ(qkv, n, w, scale)
	kp, vp := s.kp[:npad*dh], s.vp[:n*dh]
	probs := s.probs[:cap(s.probs)]
	var acc [tileRows * 16]float32
	for h := range numHeads {
		off := h * dh
		for key := range npad {
			blk := kp[(key/16)*dh*16+key%16:]
			if key >= n {
				for d := range dh {
					blk[d*16] = 0
				}
				continue
			}
			k := qkv[key*stride+w+off : key*stride+w+off+dh]
			for d, v := range k {
				blk[d*16] = v
			}
		}
		for key := range n {
			v := qkv[key*stride+2*w+off : key*stride+2*w+off+dh]
			for p := range dh / 16 {
				copy(vp[p*n*16+key*16:p*n*16+key*16+16], v[p*16:p*16+16])
			}
		}
		// Scores, then a softmax per row over the n real keys.
		for j := range npad / 16 {
			for t := 0; t < n; t += tileRows {
				gemm6x16(dh, &qkv[t*stride+off], stride, &kp[j*dh*16], &acc)
				for r := range min(tileRows, n-t) {
					copy(probs[(t+r)*npad+j*16:(t+r)*npad+j*16+16], acc[r*16:r*16+16])
				}
			}
		}
		for t := range n {
			softmax(probs[t*npad : t*npad+n])
		}
		for p := range dh / 16 {
			for t := 0; t < n; t += tileRows {
				gemm6x16(n, &probs[t*npad], npad, &vp[p*n*16], &acc)
				for r := range min(tileRows, n-t) {
					o := (t+r)*w + off + p*16
					copy(dst[o:o+16], acc[r*16:r*16+16])
				}
			}
		}
	}
}

func scaleQ(qkv []float32, n, w int, scale float32) {
	for i := range n {
		q := qkv[i*3*w : i*3*w+w]
		for j := range q {
			q[j] *= scale
		}
	}
}

// softmax replaces row with exp(row - max) / Σ.
func softmax(row []float32) {
	maxv := float32(math.Inf(-1))
	for _, v := range row {
		maxv = max(maxv, v)
	}
	var sum float32
	for j, v := range row {
		e := float32(math.Exp(float64(v - maxv)))
		row[j] = e
		sum += e
	}
	inv := 1 / sum
	for j := range row {
		row[j] *= inv
	}
}

// attentionGo is attention for machines without the FMA kernel.
func attentionGo(dst, qkv []float32, n, w int, scale float32, p []float32) {
	dh := w / numHeads
	stride := 3 * w
	p = p[:n]
	scaleQ(qkv, n, w, scale)
	for h := range numHeads {
		off := h * dh
		for i := range n {
			q := qkv[i*stride+off : i*stride+off+dh]
			maxv := float32(math.Inf(-1))
			for j := range n {
				k := qkv[j*stride+w+off : j*stride+w+off+dh]
				v := dotUnitary(q, k)
				p[j] = v
				maxv = max(maxv, v)
			}
			var sum float32
			for j, v := range p {
				e := float32(math.Exp(float64(v - maxv)))
				p[j] = e
				sum += e
			}
			out := dst[i*w+off : i*w+off+dh]
			clear(out)
			for j, pj := range p {
				axpyUnitary(pj/sum, qkv[j*stride+2*w+off:j*stride+2*w+off+dh], out)
			}
		}
	}
}
