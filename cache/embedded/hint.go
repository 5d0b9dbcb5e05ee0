package embedded

import (
	"hash/maphash"
	"sync"
	"unsafe"
)

// A semantic miss searches the index for its question's vector and, once
// the model has answered, upserts an entry with that same vector (the
// write-back embeds the same text, which the embedding cache answers with
// the same bits). An HNSW insert starts with a walk for the new vector's
// neighbourhood: EfConstruction candidates, most of an insert's cost, and
// memory-bound on a large bucket (BenchmarkInsert). The lookup's graph
// search has just walked to that neighbourhood, so a graph search leaves its
// EfSearch candidates here, keyed by the vector, and the insert of the same
// vector into the same graph takes them instead of walking again, adding
// the links of the best few (linkFrom): EfSearch candidates alone are a
// narrower neighbourhood than an EfConstruction walk finds, and cost recall
// (BenchmarkRealWriteBack). Candidates are re-scored exactly against the
// stored vector as they are selected (selectNeighbors), and a candidate that
// has left the graph since is skipped; nodes added since the search are not
// among them, as in any insert that ran at the time of the search.
//
// useHints turns this off (for the recall comparison in BenchmarkRealWriteBack).
var useHints = true

// maxHints bounds the candidate lists kept: one per recent graph search
// (64 candidates, 512 bytes each at the default EfSearch). A write-back
// that comes after maxHints other searches walks as usual.
const maxHints = 1024

// hintRing keeps the candidates of the last maxHints graph searches. Its
// lock is taken inside the index's (searches hold mu shared), never around it.
type hintRing struct {
	mu    sync.Mutex
	seed  maphash.Seed
	slots []hintSlot
	next  int
	index map[uint64]int32 // vector hash → slot
}

type hintSlot struct {
	sum   uint64
	graph uint64 // graph.id of the graph the candidates are nodes of; 0 once taken
	cands []cand
}

func newHintRing() *hintRing {
	return &hintRing{seed: maphash.MakeSeed(), slots: make([]hintSlot, maxHints), index: make(map[uint64]int32, maxHints)}
}

// sum hashes a vector's bits as given to Search or Upsert.
func (h *hintRing) sum(v []float32) uint64 {
	if len(v) == 0 {
		return 0
	}
	return maphash.Bytes(h.seed, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
}

// put remembers cs, the candidates a search of graph g found for the vector
// with hash sum, replacing the oldest list when full. cs is copied. Graphs
// are named by their id, not held: a dropped graph is not kept alive here.
func (h *hintRing) put(sum uint64, g *graph, cs []cand) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.slots[h.next]
	if s.graph != 0 && h.index[s.sum] == int32(h.next) {
		delete(h.index, s.sum)
	}
	s.sum, s.graph, s.cands = sum, g.id, append(s.cands[:0], cs...)
	h.index[sum] = int32(h.next)
	h.next = (h.next + 1) % len(h.slots)
}

// take returns a copy of the candidates found in g for the vector with hash
// sum, appended to dst, and forgets them; ok is false when there are none.
func (h *hintRing) take(sum uint64, g *graph, dst []cand) (_ []cand, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, found := h.index[sum]
	if !found {
		return dst, false
	}
	s := &h.slots[i]
	delete(h.index, sum)
	if s.graph != g.id {
		return dst, false
	}
	s.graph = 0
	return append(dst, s.cands...), true
}

// hintExpand is how many of a search's best candidates an insert from them
// (linkFrom) expands by their links.
const hintExpand = 8

// hint gives slot id, about to be linked, the candidates a search for its
// vector found (see hint.go).
func (g *graph) hint(id int32, cs []cand) {
	if g.hints == nil {
		g.hints = make(map[int32][]cand)
	}
	g.hints[id] = cs
}

// linkFrom links id, a node of level 0 whose vector is q, as link does but
// choosing its neighbours among cands, a search's candidates for q sorted
// best first, instead of walking the graph. Candidates no longer in the
// graph are skipped; the others are re-scored against q exactly as they are
// looked at. It reports false, having changed nothing, when no candidate is
// left.
func (g *graph) linkFrom(id int32, q []float32, cands []cand, sc *scratch) bool {
	res := sc.out[:0]
	for _, c := range cands {
		if c.id != id && g.has(c.id, 0) {
			res = append(res, c)
		}
	}
	if len(res) == 0 {
		sc.out = res
		return false
	}
	// Widen the search's EfSearch candidates towards EfConstruction: the
	// links of the best few, scored on the half copy as a walk would.
	half := g.vecs.withHalf
	sc.reset(len(g.nodes))
	sc.visit(id)
	for _, c := range res {
		sc.visit(c.id)
	}
	n := len(res)
	for i := range min(n, hintExpand) {
		for _, x := range g.links(res[i].id, 0) {
			if g.has(x, 0) && sc.visit(x) {
				res = append(res, cand{x, g.sim(q, x, half)})
			}
		}
	}
	sc.out = res
	if len(res) > n {
		sortBySim(res)
	}
	if len(sc.sels) == 0 {
		sc.sels = append(sc.sels, nil)
	}
	sel := g.selectNeighbors(res, g.m, q, sc.sels[0][:0])
	sc.sels[0] = sel
	for _, c := range sel {
		g.addLink(id, c, 0, sc)
	}
	for _, c := range sel {
		g.addLink(c.id, cand{id, c.sim}, 0, sc)
	}
	return true
}
