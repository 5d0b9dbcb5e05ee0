package embedded

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// This file holds a small HNSW graph (Malkov & Yashunin, "Efficient and
// robust approximate nearest neighbor search using Hierarchical Navigable
// Small World graphs", 2016) over the slots of one bucket.
//
// Why not github.com/coder/hnsw (a clean, CC0 HNSW in Go): it would mean a
// new dependency in go.mod for ~450 lines, and it fits less well than it
// seems. Its nodes carry their own vectors, while here a bucket's vectors
// live once, in chunked storage shared with the exact scan below FlatLimit,
// and graph nodes are just slot numbers (so deletion frees a slot the next
// insert reuses, and persistence writes links as small integers). Its
// Export/Import is a whole-graph stream of its own format that would have to
// be nested inside the checksummed snapshot anyway. And we need control of
// the parallel bulk build and of neighbour repair on delete, which the cache
// does constantly (eviction, TTL, replacement).

// chunkShift sizes vector chunks: 1<<chunkShift slots per chunk, so a bucket
// grows without copying its existing vectors.
const chunkShift = 10

// vecStore holds the vectors of one bucket, slot i at chunks[i>>chunkShift].
type vecStore struct {
	dim    int
	chunks [][]float32
	// half mirrors chunks in binary16 while withHalf (see half.go).
	half     [][]uint16
	withHalf bool
}

func (s *vecStore) at(i int32) []float32 {
	c := s.chunks[i>>chunkShift]
	off := int(i&(1<<chunkShift-1)) * s.dim
	return c[off : off+s.dim : off+s.dim]
}

func (s *vecStore) set(i int32, v []float32) {
	for int(i>>chunkShift) >= len(s.chunks) {
		s.chunks = append(s.chunks, make([]float32, (1<<chunkShift)*s.dim))
	}
	copy(s.at(i), v)
	if s.withHalf {
		for int(i>>chunkShift) >= len(s.half) {
			s.half = append(s.half, make([]uint16, (1<<chunkShift)*s.dim))
		}
		toHalf(s.halfAt(i), v)
	}
}

// cand is a node with its similarity to the current query.
type cand struct {
	id  int32
	sim float32
}

// minHeap is a binary min-heap on sim; pushing negated sims makes it a max-heap.
type minHeap []cand

func (h *minHeap) push(c cand) {
	*h = append(*h, c)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].sim <= a[i].sim {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *minHeap) pop() cand {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && a[l].sim < a[m].sim {
			m = l
		}
		if r < n && a[r].sim < a[m].sim {
			m = r
		}
		if m == i {
			break
		}
		a[m], a[i] = a[i], a[m]
		i = m
	}
	*h = a
	return top
}

// scratch is per-search state, pooled so that searches do not allocate.
type scratch struct {
	// visited is a bitset over slots, cleared per layer search: 12.5 KB at
	// 100k slots stays in L1/L2, where a word-per-slot generation array
	// (400 KB) missed cache on most neighbour checks.
	visited []uint64
	cands   minHeap // max-heap via negated sims
	res     minHeap
	out     []cand
	links   []int32
	batch   []int32
	// For inserts: the neighbours chosen per level, and addLink's candidates.
	sels        [][]cand
	prune, kept []cand
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) reset(n int) {
	words := (n + 63) / 64
	if len(s.visited) < words {
		s.visited = make([]uint64, words+words/4)
		return
	}
	clear(s.visited[:words])
}

// visit marks i and reports whether it was unvisited.
func (s *scratch) visit(i int32) bool {
	w, bit := &s.visited[uint32(i)/64], uint64(1)<<(uint32(i)%64)
	if *w&bit != 0 {
		return false
	}
	*w |= bit
	return true
}

// node holds one slot's links above layer 0: upper[l-1] for l in
// 1..level (graph.levels); each list's cap is the layer's maximum.
type node struct {
	upper [][]int32
}

// graph is an HNSW graph over the slots of one bucket. It is not safe for
// concurrent mutation; searches may run concurrently with each other.
type graph struct {
	id    uint64 // unique in the process (graphIDs), for hint.go
	vecs  *vecStore
	m, m0 int // max links per node above layer 0, and on layer 0
	efC   int
	ml    float64
	nodes []node
	// levels[i] is slot i's top layer, -1 for a slot not in the graph. It is
	// kept apart from nodes, in one byte per slot, because has() reads it
	// for every neighbour of every expanded node: inside node (32 bytes,
	// 3.2 MB at 100k slots) almost every such read was a cache miss, 20 %
	// of a search's CPU; 100 KB of levels stay in L2.
	levels []int8
	// links0 holds every slot's layer-0 links inline, stride0 int32 per
	// slot: the count, then up to stride0-1 links (m0, or more when a
	// snapshot written with a larger M has longer lists). Layer 0 is where
	// a search spends nearly all its hops; one contiguous record per node
	// costs one cache miss per hop where slice headers (node → list of
	// lists → list) cost three dependent ones.
	links0   []int32
	stride0  int
	entry    int32
	maxLevel int
	rng      *rand.Rand

	// hints holds, for slots about to be linked, the candidates a search
	// for their vector found (hint.go); a sequential insertMany links a
	// level-0 node from them instead of walking, and then clears them.
	hints map[int32][]cand

	// locks is non-nil only during insertMany's parallel phase: then every
	// read or write of slot i's links holds locks[i], and entryMu guards
	// entry and maxLevel. Levels and vectors do not change in that phase.
	locks   []sync.Mutex
	entryMu sync.Mutex
}

// graphIDs numbers graphs, from 1.
var graphIDs atomic.Uint64

func newGraph(vecs *vecStore, m, efC int) *graph {
	vecs.enableHalf()
	return &graph{
		id:   graphIDs.Add(1),
		vecs: vecs, m: m, m0: 2 * m, efC: efC, stride0: 2*m + 1,
		ml:    1 / math.Log(float64(m)),
		entry: -1,
		rng:   rand.New(rand.NewPCG(uint64(m), uint64(efC))),
	}
}

func (g *graph) maxLinks(level int) int {
	if level == 0 {
		return g.m0
	}
	return g.m
}

// has reports whether id is in the graph on level.
func (g *graph) has(id int32, level int) bool {
	return int(id) < len(g.levels) && int(g.levels[id]) >= level
}

// links returns id's links on level, with the layer's maximum as cap: the
// caller may modify them in place, or append within cap, and then store
// the result with setLinks.
func (g *graph) links(id int32, level int) []int32 {
	if level > 0 {
		return g.nodes[id].upper[level-1]
	}
	base := int(id) * g.stride0
	rec := g.links0[base : base+g.stride0 : base+g.stride0]
	return rec[1 : 1+rec[0]]
}

// setLinks stores id's links on level (at most maxLinks(level)).
func (g *graph) setLinks(id int32, level int, links []int32) {
	if level > 0 {
		g.nodes[id].upper[level-1] = links
		return
	}
	base := int(id) * g.stride0
	rec := g.links0[base : base+g.stride0 : base+g.stride0]
	rec[0] = int32(copy(rec[1:], links))
}

// grow makes room for slots below n, not in the graph.
func (g *graph) grow(n int) {
	for len(g.nodes) < n {
		g.nodes = append(g.nodes, node{})
		g.levels = append(g.levels, -1)
	}
	if want := n * g.stride0; len(g.links0) < want {
		g.links0 = slices.Grow(g.links0, want-len(g.links0))[:want]
	}
}

// neighbors returns id's links on level; during a parallel build it copies
// them into *buf under id's lock. The result must not be modified.
func (g *graph) neighbors(id int32, level int, buf *[]int32) []int32 {
	if g.locks == nil {
		return g.links(id, level)
	}
	g.locks[id].Lock()
	*buf = append((*buf)[:0], g.links(id, level)...)
	g.locks[id].Unlock()
	return *buf
}

func (g *graph) randomLevel() int {
	l := int(-math.Log(1-g.rng.Float64()) * g.ml)
	return min(l, 15)
}

// sim returns the similarity of q to slot n: from the half copy if half
// (approximate, for the walk of a search), else exact.
func (g *graph) sim(q []float32, n int32, half bool) float32 {
	if half {
		return dotHalf(q, g.vecs.halfAt(n))
	}
	return dot(q, g.vecs.at(n))
}

// prefetchVec starts loading slot n's vector (the half copy if half): the
// walk knows a node's unvisited neighbours before it scores them, so their
// cache misses overlap instead of stalling one dot product after another.
func (g *graph) prefetchVec(n int32, half bool) {
	if half {
		h := g.vecs.halfAt(n)
		prefetch(unsafe.Pointer(unsafe.SliceData(h)), 2*len(h))
		return
	}
	v := g.vecs.at(n)
	prefetch(unsafe.Pointer(unsafe.SliceData(v)), 4*len(v))
}

// prefetchAhead is how many vectors ahead of the one being scored the walk
// prefetches. Prefetching a whole expansion's neighbours (up to 32 vectors,
// 512 cache lines) at once stalls on the CPU's line-fill buffers with no
// arithmetic to overlap; a short lead keeps loads in flight while the dot
// products run. 2–8 measured alike at 100k; 4 was best (p50 −15 % against
// prefetching the whole batch first).
const prefetchAhead = 4

// greedy walks level from cur to the most similar node it can reach.
func (g *graph) greedy(q []float32, cur cand, level int, half bool, sc *scratch) cand {
	for changed := true; changed; {
		changed = false
		for _, n := range g.neighbors(cur.id, level, &sc.links) {
			if !g.has(n, level) {
				continue
			}
			if s := g.sim(q, n, half); s > cur.sim {
				cur, changed = cand{n, s}, true
			}
		}
	}
	return cur
}

// searchLayer returns up to ef nodes of level near q, best first, in sc.out.
func (g *graph) searchLayer(q []float32, ep cand, ef, level int, half bool, sc *scratch) []cand {
	sc.reset(len(g.nodes))
	sc.cands, sc.res = sc.cands[:0], sc.res[:0]
	sc.visit(ep.id)
	sc.cands.push(cand{ep.id, -ep.sim})
	sc.res.push(ep)
	for len(sc.cands) > 0 {
		c := sc.cands.pop()
		if -c.sim < sc.res[0].sim && len(sc.res) >= ef {
			break
		}
		batch := sc.batch[:0]
		for _, n := range g.neighbors(c.id, level, &sc.links) {
			if !g.has(n, level) || !sc.visit(n) {
				continue
			}
			if len(batch) < prefetchAhead {
				g.prefetchVec(n, half)
			}
			batch = append(batch, n)
		}
		sc.batch = batch
		for i, n := range batch {
			if j := i + prefetchAhead; j < len(batch) {
				g.prefetchVec(batch[j], half)
			}
			s := g.sim(q, n, half)
			if len(sc.res) < ef || s > sc.res[0].sim {
				sc.cands.push(cand{n, -s})
				sc.res.push(cand{n, s})
				if len(sc.res) > ef {
					sc.res.pop()
				}
			}
		}
	}
	sc.out = append(sc.out[:0], sc.res...)
	sortBySim(sc.out)
	return sc.out
}

// sortBySim sorts cs best first.
func sortBySim(cs []cand) {
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.sim > b.sim:
			return -1
		case a.sim < b.sim:
			return 1
		}
		return 0
	})
}

// search returns up to ef nodes near q, best first, with exact similarities.
// The walk scores the half copy when there is one; its ef results are then
// re-scored from the float32 vectors and re-sorted. The result aliases sc.
func (g *graph) search(q []float32, ef int, sc *scratch) []cand {
	if g.entry < 0 {
		return nil
	}
	half := g.vecs.withHalf
	ep := cand{g.entry, g.sim(q, g.entry, half)}
	for l := g.maxLevel; l > 0; l-- {
		ep = g.greedy(q, ep, l, half, sc)
	}
	out := g.searchLayer(q, ep, ef, 0, half, sc)
	if half {
		g.rescore(q, out)
	}
	return out
}

// rescore replaces the similarities of cs, found by a walk of the half
// copy, with exact ones from the float32 vectors, and sorts cs best first.
func (g *graph) rescore(q []float32, cs []cand) {
	for i := range min(len(cs), prefetchAhead) {
		g.prefetchVec(cs[i].id, false)
	}
	for i := range cs {
		if j := i + prefetchAhead; j < len(cs) {
			g.prefetchVec(cs[j].id, false)
		}
		cs[i].sim = dot(q, g.vecs.at(cs[i].id))
	}
	sortBySim(cs)
}

// selectNeighbors applies the HNSW heuristic (algorithm 4): keep a candidate
// only if it is closer to the base than to every neighbour already kept,
// which preserves links in every direction instead of only to one cluster.
// cands must be sorted best first; the kept ones, with their similarity to
// the base, are appended to out. When base is not nil, the similarities of
// cands are those of the half copy (a walk's), and each candidate looked at
// is re-scored against base exactly first: its vector is loaded for the
// comparisons anyway, and the candidates past the m-th kept one, most of an
// insert's EfConstruction, are never loaded at all.
func (g *graph) selectNeighbors(cands []cand, m int, base []float32, out []cand) []cand {
	start := len(out)
	for _, c := range cands {
		if len(out)-start >= m {
			break
		}
		vc := g.vecs.at(c.id)
		if base != nil {
			c.sim = dot(base, vc)
		}
		keep := true
		for _, r := range out[start:] {
			if dot(vc, g.vecs.at(r.id)) > c.sim {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, c)
		}
	}
	return out
}

// parallelMin is the batch size from which insertMany uses every CPU.
const parallelMin = 256

// insertMany adds slots ids, whose vectors are already stored, to the graph.
// Large batches are linked in parallel (hnswlib's scheme: a lock per node's
// link lists, one for the entry point); levels are drawn up front so the
// random sequence, and so the graph's shape, does not depend on scheduling
// more than the order of links does.
func (g *graph) insertMany(ids []int32) {
	// Hints are for this batch only: one left by a slot evicted before it
	// was linked must not reach the next entry put in that slot.
	defer clear(g.hints)
	if len(ids) == 0 {
		return
	}
	g.grow(int(slices.Max(ids)) + 1)
	for _, id := range ids {
		level := g.randomLevel()
		var upper [][]int32
		if level > 0 {
			upper = make([][]int32, level)
			for l := range upper {
				upper[l] = make([]int32, 0, g.m)
			}
		}
		g.nodes[id] = node{upper: upper}
		g.setLinks(id, 0, nil)
		g.levels[id] = int8(level)
	}
	if g.entry < 0 {
		g.entry, g.maxLevel = ids[0], int(g.levels[ids[0]])
		ids = ids[1:]
	}
	workers := runtime.GOMAXPROCS(0)
	if len(ids) < parallelMin || workers == 1 {
		sc := scratchPool.Get().(*scratch)
		for _, id := range ids {
			g.link(id, sc)
		}
		scratchPool.Put(sc)
		return
	}
	g.locks = make([]sync.Mutex, len(g.nodes))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			sc := new(scratch)
			for i := next.Add(1) - 1; i < int64(len(ids)); i = next.Add(1) - 1 {
				g.link(ids[i], sc)
			}
		})
	}
	wg.Wait()
	g.locks = nil
}

// link connects node id, whose level is set and links are empty.
func (g *graph) link(id int32, sc *scratch) {
	parallel := g.locks != nil
	if parallel {
		g.entryMu.Lock()
	}
	entry, maxLevel := g.entry, g.maxLevel
	if parallel {
		g.entryMu.Unlock()
	}
	level := int(g.levels[id])
	q := g.vecs.at(id)
	if cs, ok := g.hints[id]; ok && level == 0 && !parallel && g.linkFrom(id, q, cs, sc) {
		return
	}
	// The walk scores the half copy, as a search does, and the candidates
	// it returns are re-scored exactly before the neighbours are chosen
	// from them: the walk is bound by memory traffic (see half.go), and the
	// selection heuristic then compares exact similarities only.
	half := g.vecs.withHalf
	ep := cand{entry, g.sim(q, entry, half)}
	for l := maxLevel; l > level; l-- {
		ep = g.greedy(q, ep, l, half, sc)
	}
	// First set id's own links on every level, top down; only then add the
	// links back to id, which make it reachable. In a parallel build another
	// worker that reaches id on level l then always finds its links on the
	// levels below, instead of stalling on an empty list and linking its own
	// node to id alone.
	top := min(level, maxLevel)
	for len(sc.sels) <= top {
		sc.sels = append(sc.sels, nil)
	}
	sels := sc.sels[:top+1]
	for l := range sels {
		sels[l] = sels[l][:0]
	}
	for l := top; l >= 0; l-- {
		res := g.searchLayer(q, ep, g.efC, l, half, sc)
		// A reused slot may still be the target of stale links: never link to self.
		res = slices.DeleteFunc(res, func(c cand) bool { return c.id == id })
		if len(res) == 0 {
			continue
		}
		var exact []float32
		if half {
			exact = q
		}
		sels[l] = g.selectNeighbors(res, g.m, exact, sels[l])
		// Add to id's links rather than overwrite them: a stale link from
		// a reused slot may have let another worker link to id already.
		if parallel {
			g.locks[id].Lock()
		}
		for _, c := range sels[l] {
			g.addLink(id, c, l, sc)
		}
		if parallel {
			g.locks[id].Unlock()
		}
		ep = res[0]
	}
	for l, sel := range sels {
		for _, c := range sel {
			if parallel {
				g.locks[c.id].Lock()
			}
			// c.sim is sim(id, c.id), the same product as sim(c.id, id).
			g.addLink(c.id, cand{id, c.sim}, l, sc)
			if parallel {
				g.locks[c.id].Unlock()
			}
		}
	}
	if parallel {
		g.entryMu.Lock()
		defer g.entryMu.Unlock()
	}
	if level > g.maxLevel {
		g.entry, g.maxLevel = id, level
	}
}

// addLink links n to c.id (c.sim is their similarity) on level, pruning n's
// links with the heuristic when they are full. It allocates nothing: the
// candidates live in sc.
func (g *graph) addLink(n int32, c cand, level int, sc *scratch) {
	links := g.links(n, level)
	kept := links[:0]
	for _, x := range links {
		if x != c.id && g.has(x, level) {
			kept = append(kept, x)
		}
	}
	links = kept
	if len(links) < g.maxLinks(level) {
		g.setLinks(n, level, append(links, c.id))
		return
	}
	// The links' vectors are scattered over the store: prefetch ahead of
	// the products, as the walk does.
	vn := g.vecs.at(n)
	for _, x := range links[:min(len(links), prefetchAhead)] {
		g.prefetchVec(x, false)
	}
	cs := sc.prune[:0]
	for i, x := range links {
		if j := i + prefetchAhead; j < len(links) {
			g.prefetchVec(links[j], false)
		}
		cs = append(cs, cand{x, dot(vn, g.vecs.at(x))})
	}
	cs = append(cs, c)
	sortBySim(cs)
	sel := g.selectNeighbors(cs, g.maxLinks(level), nil, sc.kept[:0])
	links = links[:0]
	for _, k := range sel {
		links = append(links, k.id)
	}
	g.setLinks(n, level, links)
	sc.prune, sc.kept = cs, sel
}

// remove takes slot id out of the graph. Each neighbour that linked back to
// id loses that link and gets, in its place, the most similar of id's other
// neighbours (the cheap form of hnswlib's repairConnectionsForUpdate); links
// into id from nodes that id did not link to stay behind as stale and are
// skipped by has() until the slot is reused.
func (g *graph) remove(id int32) {
	if !g.has(id, 0) {
		return
	}
	ndLevel := int(g.levels[id])
	olds := make([][]int32, ndLevel+1)
	for l := range olds {
		olds[l] = slices.Clone(g.links(id, l))
	}
	g.setLinks(id, 0, nil)
	g.nodes[id], g.levels[id] = node{}, -1
	for l := 0; l <= ndLevel; l++ {
		old := olds[l]
		for _, n := range old {
			if !g.has(n, l) {
				continue
			}
			links := g.links(n, l)
			i := slices.Index(links, id)
			if i < 0 {
				continue
			}
			links = slices.Delete(links, i, i+1)
			vn := g.vecs.at(n)
			best, bestSim := int32(-1), float32(math.Inf(-1))
			for _, c := range old {
				if c == n || !g.has(c, l) || slices.Contains(links, c) {
					continue
				}
				if s := dot(vn, g.vecs.at(c)); s > bestSim {
					best, bestSim = c, s
				}
			}
			if best >= 0 {
				links = append(links, best)
			}
			g.setLinks(n, l, links)
		}
	}
	if g.entry == id {
		g.entry, g.maxLevel = -1, 0
		for i := range g.levels {
			if lv := int(g.levels[i]); lv >= 0 && (g.entry < 0 || lv > g.maxLevel) {
				g.entry, g.maxLevel = int32(i), lv
			}
		}
	}
}
