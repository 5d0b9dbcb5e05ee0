package embed

import (
	"fmt"
	"math"
)

// Model dimensions of Universal Sentence Encoder Lite (English). They are
// checked against the tensor shapes at load.
const (
	maxTokens = 128
	embDim    = 256  // token embedding and layer-0 input width
	hidden    = 512  // transformer width after layer 0's input projection
	ffnDim    = 1536 // FFN inner width
	numHeads  = 4    // both layers; head size is width/4 (64, then 128)
	vocabRows = 8002 // embedding rows; ids index them directly
)

// layer is one pre-norm transformer layer. In layer 0 the attention runs at
// the input width (256) and res projects the input to 512 for the residual
// (graph: Layer_0/TransformerLayer/AdjustResidualInput/dense); layer 1 adds
// its input unchanged (res == nil).
type layer struct {
	width      int // input and attention width
	ln1g, ln1b []float32
	qkv, out   *linear
	res        *linear
	ln2g, ln2b []float32
	ffn1, ffn2 *linear
	scale      float32 // graph constant MultiheadAttention/mul/y = 1/sqrt(head size)
}

type useModel struct {
	emb       []float32 // [vocabRows][embDim], or nil if embHalf is set
	embHalf   []uint16  // the same as half floats (rows widened on use)
	timingInv []float32 // [embDim/2]
	timing    []float32 // [maxTokens][embDim]: sin | cos of position·timingInv
	lnEps     float32
	l2Eps     float32
	layers    [2]layer
	head      *linear
}

// newUSEModel unpacks the model's tensors; with bf16 (and a CPU with
// AVX512_BF16) the linear layers are packed for the bf16 kernels.
func newUSEModel(f *modelFile, bf16 bool) (*useModel, error) {
	m := &useModel{}
	var err error
	get := func(name string, shape ...int) []float32 {
		if err != nil {
			return nil
		}
		var d []float32
		d, err = f.get(name, shape...)
		return d
	}
	lin := func(name string, in, out int) *linear {
		var wh []uint16
		var w []float32
		if err == nil {
			wh, err = f.getHalf(name+".w", in, out)
		}
		if wh == nil || !haveF16C {
			w = get(name+".w", in, out)
		}
		b := get(name+".b", out)
		if err != nil {
			return nil
		}
		if bf16 {
			if l := newLinearBF16(w, wh, b, in, out); l != nil {
				return l
			}
		}
		return newLinear(w, wh, b, in, out)
	}
	if err == nil {
		m.embHalf, err = f.getHalf("emb", vocabRows, embDim)
	}
	if m.embHalf == nil {
		m.emb = get("emb", vocabRows, embDim)
	}
	m.timingInv = get("timing_inv", 1, embDim/2)
	if eps := get("ln_eps"); err == nil {
		m.lnEps = eps[0]
	}
	if eps := get("l2_eps"); err == nil {
		m.l2Eps = eps[0]
	}
	for i, w := range []int{embDim, hidden} {
		p := fmt.Sprintf("l%d.", i)
		l := &m.layers[i]
		l.width = w
		l.ln1g, l.ln1b = get(p+"ln1.g", w), get(p+"ln1.b", w)
		l.qkv = lin(p+"qkv", w, 3*w)
		l.out = lin(p+"out", w, hidden)
		if i == 0 {
			l.res = lin("l0.res", embDim, hidden)
		}
		l.ln2g, l.ln2b = get(p+"ln2.g", hidden), get(p+"ln2.b", hidden)
		l.ffn1 = lin(p+"ffn1", hidden, ffnDim)
		l.ffn2 = lin(p+"ffn2", ffnDim, hidden)
		if s := get(p + "scale"); err == nil {
			l.scale = s[0]
		}
	}
	m.head = lin("head", hidden, hidden)
	if err != nil {
		return nil, err
	}
	// The timing signal depends only on the position: tabulate it once
	// (the graph's Sin/Cos of position × ExpandDims_1, in float32).
	half := embDim / 2
	m.timing = make([]float32, maxTokens*embDim)
	for t := range maxTokens {
		row := m.timing[t*embDim : t*embDim+embDim]
		for j, inv := range m.timingInv[:half] {
			sin, cos := math.Sincos(float64(float32(t) * inv))
			row[j], row[half+j] = float32(sin), float32(cos)
		}
	}
	return m, nil
}

// bytes is the resident size of the weights as used at run time.
func (m *useModel) bytes() int64 {
	n := 2*int64(len(m.embHalf)) + 4*int64(len(m.emb)+len(m.timingInv)+len(m.timing))
	for _, l := range m.layers {
		n += 4 * int64(len(l.ln1g)+len(l.ln1b)+len(l.ln2g)+len(l.ln2b))
		for _, lin := range []*linear{l.qkv, l.out, l.res, l.ffn1, l.ffn2} {
			if lin != nil {
				n += lin.bytes()
			}
		}
	}
	return n + m.head.bytes()
}

// maxBatchRows bounds the tokens of one batched encoder pass (the texts of
// a batch are stacked row after row); a text has at most maxTokens.
const maxBatchRows = 256

// scratch is one worker's activations, sized for maxBatchRows token rows.
type scratch struct {
	x0    []float32 // rows × embDim
	hn    []float32 // rows × hidden
	qkv   []float32 // rows × 3·hidden
	att   []float32 // rows × hidden
	y     []float32 // rows × hidden
	y2    []float32 // rows × hidden
	ffn   []float32 // rows × ffnDim
	p     []float32 // maxTokens attention weights (portable path)
	kp    []float32 // one head's packed K (FMA path)
	vp    []float32 // one head's packed V (FMA path)
	probs []float32 // one head's attention weights, (n+spare) × n rounded to 16
	pool  []float32 // one mean-pooled row per text of the batch
	head  []float32 // the head's output per text
	xb    []uint32  // bf16 pairs of a linear layer's input (bf16 kernel), on first use
}

func newScratch() *scratch {
	// Inputs of linear.apply get tileRows-1 spare rows (see tileRows).
	const rows = maxBatchRows + tileRows - 1
	const one = maxTokens + tileRows - 1
	return &scratch{
		x0:    make([]float32, rows*embDim),
		hn:    make([]float32, rows*hidden),
		qkv:   make([]float32, rows*3*hidden),
		att:   make([]float32, rows*hidden),
		y:     make([]float32, maxBatchRows*hidden),
		y2:    make([]float32, rows*hidden),
		ffn:   make([]float32, rows*ffnDim),
		p:     make([]float32, maxTokens),
		kp:    make([]float32, maxTokens*hidden/numHeads),
		vp:    make([]float32, maxTokens*hidden/numHeads),
		probs: make([]float32, one*maxTokens),
		pool:  make([]float32, rows*hidden),
		head:  make([]float32, maxBatchRows*hidden),
	}
}

// forwardBatch encodes several texts in one pass: their token rows are
// stacked, so every matrix product streams each weight panel once for the
// whole batch (a matrix-matrix product instead of one per text); only
// attention and pooling run per text. Σ len(texts[i]) ≤ maxBatchRows. Each
// vector is bit-for-bit the one forward gives for the text alone.
func (m *useModel) forwardBatch(texts [][]int32, s *scratch, dst [][]float32) {
	n := 0
	for _, ids := range texts {
		n += len(ids)
	}
	// Input: the graph adds emb + (emb + timing) — keep that order.
	x0 := s.x0[:n*embDim]
	var row16 [embDim]float32
	t := 0
	for _, ids := range texts {
		for pos, id := range ids {
			var e []float32
			if m.embHalf != nil {
				for j, h := range m.embHalf[int(id)*embDim : int(id)*embDim+embDim] {
					row16[j] = f16ToF32(h)
				}
				e = row16[:]
			} else {
				e = m.emb[int(id)*embDim : int(id)*embDim+embDim]
			}
			row := x0[t*embDim : t*embDim+embDim]
			tim := m.timing[pos*embDim : pos*embDim+embDim]
			for j, v := range e {
				row[j] = v + (v + tim[j])
			}
			t++
		}
	}
	// attend runs attention text by text over the stacked rows.
	attend := func(att, qkv []float32, w int, scale float32) {
		off := 0
		for _, ids := range texts {
			k := len(ids)
			attention(att[off*w:], qkv[off*3*w:], k, w, scale, s)
			off += k
		}
	}

	// Layer 0.
	l := &m.layers[0]
	hn, qkv, att := s.hn[:n*embDim], s.qkv[:n*3*embDim], s.att[:n*embDim]
	y, y2 := s.y[:n*hidden], s.y2[:n*hidden]
	layerNorm(hn, x0, n, embDim, l.ln1g, l.ln1b, m.lnEps)
	l.qkv.apply(qkv, hn, n, nil, false, s)
	attend(att, qkv, embDim, l.scale)
	l.res.apply(y2, x0, n, nil, false, s)
	l.out.apply(y, att, n, y2, false, s) // attention + projected residual
	m.ffn(l, y, y2, n, s)                // y2 = FFN(y) + y

	// Layer 1.
	l = &m.layers[1]
	hn, qkv, att = s.hn[:n*hidden], s.qkv[:n*3*hidden], s.att[:n*hidden]
	layerNorm(hn, y2, n, hidden, l.ln1g, l.ln1b, m.lnEps)
	l.qkv.apply(qkv, hn, n, nil, false, s)
	attend(att, qkv, hidden, l.scale)
	l.out.apply(y, att, n, y2, false, s)
	m.ffn(l, y, y2, n, s)

	// Mean pool per text, one tanh layer for the batch, L2 normalisation.
	nt := len(texts)
	pool := s.pool[:nt*hidden]
	clear(pool)
	t = 0
	for i, ids := range texts {
		p := pool[i*hidden : i*hidden+hidden]
		for range ids {
			axpyUnitary(1, y2[t*hidden:t*hidden+hidden], p)
			t++
		}
		inv := float32(len(ids))
		for j := range p {
			p[j] /= inv
		}
	}
	head := s.head[:nt*hidden]
	m.head.apply(head, pool, nt, nil, false, s)
	for i, d := range dst {
		d = d[:hidden]
		var ss float32
		for j, v := range head[i*hidden : i*hidden+hidden] {
			v = float32(math.Tanh(float64(v)))
			d[j] = v
			ss += v * v
		}
		scale := float32(1 / math.Sqrt(float64(max(ss, m.l2Eps))))
		for j := range d {
			d[j] *= scale
		}
	}
}

// ffn computes out = conv2(relu(conv1(LN(x)))) + x.
func (m *useModel) ffn(l *layer, x, out []float32, n int, s *scratch) {
	hn, h := s.hn[:n*hidden], s.ffn[:n*ffnDim]
	layerNorm(hn, x, n, hidden, l.ln2g, l.ln2b, m.lnEps)
	l.ffn1.apply(h, hn, n, nil, true, s)
	l.ffn2.apply(out, h, n, x, false, s)
}

// layerNorm normalises each of n rows of width w: (x-mean)·rsqrt(var+eps)·g + b.
func layerNorm(dst, x []float32, n, w int, g, b []float32, eps float32) {
	g, b = g[:w], b[:w]
	for t := range n {
		row := x[t*w : t*w+w]
		out := dst[t*w : t*w+w]
		var sum float32
		for _, v := range row {
			sum += v
		}
		mean := sum / float32(w)
		var sq float32
		for _, v := range row {
			d := v - mean
			sq += d * d
		}
		r := float32(1 / math.Sqrt(float64(sq/float32(w)+eps)))
		for j, v := range row {
			out[j] = g[j]*r*(v-mean) + b[j]
		}
	}
}
