package embedded

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
	marks []uint32
	gen   uint32
	cands minHeap // max-heap via negated sims
	res   minHeap
	out   []cand
	links []int32
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) reset(n int) {
	if len(s.marks) < n {
		s.marks = make([]uint32, n+n/4)
		s.gen = 0
	}
	s.gen++
	if s.gen == 0 {
		clear(s.marks)
		s.gen = 1
	}
}

// visit marks i and reports whether it was unvisited.
func (s *scratch) visit(i int32) bool {
	if s.marks[i] == s.gen {
		return false
	}
	s.marks[i] = s.gen
	return true
}

// node is one slot of the graph. level is -1 for a slot not in the graph.
type node struct {
	level int8
	links [][]int32 // links[l] for l in 0..level; cap is the layer's maximum
}

// graph is an HNSW graph over the slots of one bucket. It is not safe for
// concurrent mutation; searches may run concurrently with each other.
type graph struct {
	vecs     *vecStore
	m, m0    int // max links per node above layer 0, and on layer 0
	efC      int
	ml       float64
	nodes    []node
	entry    int32
	maxLevel int
	rng      *rand.Rand

	// locks is non-nil only during insertMany's parallel phase: then every
	// read or write of nodes[i].links holds locks[i], and entryMu guards
	// entry and maxLevel. Levels and vectors do not change in that phase.
	locks   []sync.Mutex
	entryMu sync.Mutex
}

func newGraph(vecs *vecStore, m, efC int) *graph {
	return &graph{
		vecs: vecs, m: m, m0: 2 * m, efC: efC,
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
	return int(id) < len(g.nodes) && int(g.nodes[id].level) >= level
}

// neighbors returns id's links on level; during a parallel build it copies
// them into *buf under id's lock. The result must not be modified.
func (g *graph) neighbors(id int32, level int, buf *[]int32) []int32 {
	if g.locks == nil {
		return g.nodes[id].links[level]
	}
	g.locks[id].Lock()
	*buf = append((*buf)[:0], g.nodes[id].links[level]...)
	g.locks[id].Unlock()
	return *buf
}

func (g *graph) randomLevel() int {
	l := int(-math.Log(1-g.rng.Float64()) * g.ml)
	return min(l, 15)
}

// greedy walks level from cur to the most similar node it can reach.
func (g *graph) greedy(q []float32, cur cand, level int, sc *scratch) cand {
	for changed := true; changed; {
		changed = false
		for _, n := range g.neighbors(cur.id, level, &sc.links) {
			if !g.has(n, level) {
				continue
			}
			if s := dot(q, g.vecs.at(n)); s > cur.sim {
				cur, changed = cand{n, s}, true
			}
		}
	}
	return cur
}

// searchLayer returns up to ef nodes of level near q, best first, in sc.out.
func (g *graph) searchLayer(q []float32, ep cand, ef, level int, sc *scratch) []cand {
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
		for _, n := range g.neighbors(c.id, level, &sc.links) {
			if !g.has(n, level) || !sc.visit(n) {
				continue
			}
			s := dot(q, g.vecs.at(n))
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
	slices.SortFunc(sc.out, func(a, b cand) int {
		switch {
		case a.sim > b.sim:
			return -1
		case a.sim < b.sim:
			return 1
		}
		return 0
	})
	return sc.out
}

// search returns up to ef nodes near q, best first. The result aliases sc.
func (g *graph) search(q []float32, ef int, sc *scratch) []cand {
	if g.entry < 0 {
		return nil
	}
	ep := cand{g.entry, dot(q, g.vecs.at(g.entry))}
	for l := g.maxLevel; l > 0; l-- {
		ep = g.greedy(q, ep, l, sc)
	}
	return g.searchLayer(q, ep, ef, 0, sc)
}

// selectNeighbors applies the HNSW heuristic (algorithm 4): keep a candidate
// only if it is closer to the base than to every neighbour already kept,
// which preserves links in every direction instead of only to one cluster.
// cands must be sorted best first; the result is appended to out.
func (g *graph) selectNeighbors(cands []cand, m int, out []int32) []int32 {
	start := len(out)
	for _, c := range cands {
		if len(out)-start >= m {
			break
		}
		vc := g.vecs.at(c.id)
		keep := true
		for _, r := range out[start:] {
			if dot(vc, g.vecs.at(r)) > c.sim {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, c.id)
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
	if len(ids) == 0 {
		return
	}
	for top := int(slices.Max(ids)); top >= len(g.nodes); {
		g.nodes = append(g.nodes, node{level: -1})
	}
	for _, id := range ids {
		level := g.randomLevel()
		links := make([][]int32, level+1)
		for l := range links {
			links[l] = make([]int32, 0, g.maxLinks(l))
		}
		g.nodes[id] = node{level: int8(level), links: links}
	}
	if g.entry < 0 {
		g.entry, g.maxLevel = ids[0], int(g.nodes[ids[0]].level)
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
	level := int(g.nodes[id].level)
	q := g.vecs.at(id)
	ep := cand{entry, dot(q, g.vecs.at(entry))}
	for l := maxLevel; l > level; l-- {
		ep = g.greedy(q, ep, l, sc)
	}
	// First set id's own links on every level, top down; only then add the
	// links back to id, which make it reachable. In a parallel build another
	// worker that reaches id on level l then always finds its links on the
	// levels below, instead of stalling on an empty list and linking its own
	// node to id alone.
	sels := make([][]int32, min(level, maxLevel)+1)
	for l := min(level, maxLevel); l >= 0; l-- {
		res := g.searchLayer(q, ep, g.efC, l, sc)
		// A reused slot may still be the target of stale links: never link to self.
		res = slices.DeleteFunc(res, func(c cand) bool { return c.id == id })
		if len(res) == 0 {
			continue
		}
		sels[l] = g.selectNeighbors(res, g.m, nil)
		// Add to id's links rather than overwrite them: a stale link from
		// a reused slot may have let another worker link to id already.
		if parallel {
			g.locks[id].Lock()
		}
		for _, n := range sels[l] {
			g.addLink(id, n, l)
		}
		if parallel {
			g.locks[id].Unlock()
		}
		ep = res[0]
	}
	for l, sel := range sels {
		for _, n := range sel {
			if parallel {
				g.locks[n].Lock()
			}
			g.addLink(n, id, l)
			if parallel {
				g.locks[n].Unlock()
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

// addLink links n to id on level, pruning n's links with the heuristic when
// they are full.
func (g *graph) addLink(n, id int32, level int) {
	links := g.nodes[n].links[level]
	links = slices.DeleteFunc(links, func(x int32) bool { return !g.has(x, level) || x == id })
	if len(links) < g.maxLinks(level) {
		g.nodes[n].links[level] = append(links, id)
		return
	}
	vn := g.vecs.at(n)
	cs := make([]cand, 0, len(links)+1)
	for _, x := range links {
		cs = append(cs, cand{x, dot(vn, g.vecs.at(x))})
	}
	cs = append(cs, cand{id, dot(vn, g.vecs.at(id))})
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.sim > b.sim:
			return -1
		case a.sim < b.sim:
			return 1
		}
		return 0
	})
	g.nodes[n].links[level] = g.selectNeighbors(cs, g.maxLinks(level), links[:0])
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
	nd := g.nodes[id]
	g.nodes[id] = node{level: -1}
	for l := 0; l <= int(nd.level); l++ {
		old := nd.links[l]
		for _, n := range old {
			if !g.has(n, l) {
				continue
			}
			links := g.nodes[n].links[l]
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
			g.nodes[n].links[l] = links
		}
	}
	if g.entry == id {
		g.entry, g.maxLevel = -1, 0
		for i := range g.nodes {
			if lv := int(g.nodes[i].level); lv >= 0 && (g.entry < 0 || lv > g.maxLevel) {
				g.entry, g.maxLevel = int32(i), lv
			}
		}
	}
}
