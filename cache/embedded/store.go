package embedded

import (
	"slices"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

// bucketKey identifies the only entries a search may compare against.
type bucketKey struct{ partition, fingerprint string }

// item is one stored entry and where its vector lives.
type item struct {
	entry   cache.Entry
	b       *bucket
	slot    int32
	seq     uint64 // insertion order; breaks ties between equal Created times
	heapIdx int
}

// bucket holds the entries of one (partition, fingerprint). Up to
// state.flatLimit live entries it is searched by exact scan; above that it
// also keeps an HNSW graph over its slots, dropped again when the bucket
// shrinks below half the limit (hysteresis, so a bucket at the limit does not
// rebuild its graph on every insert and delete).
type bucket struct {
	key   bucketKey
	vecs  vecStore
	items []*item // per slot; nil is a free slot
	free  []int32
	live  int
	g     *graph
}

// state is the in-memory index. It is not safe for concurrent mutation.
type state struct {
	dim       int
	flatLimit int
	m, efC    int
	efSearch  int
	byKey     map[string]*item
	buckets   map[bucketKey]*bucket
	age       ageHeap
	seq       uint64
	bytes     int64 // itemBytes of every entry
	// pending holds slots put since the last flush that still need linking
	// into their bucket's graph; linking a batch at once can use every CPU.
	pending map[*bucket][]int32
}

func newState(o Options) *state {
	return &state{
		dim: o.Dimension, flatLimit: o.FlatLimit, m: o.M, efC: o.EfConstruction, efSearch: o.EfSearch,
		byKey:   make(map[string]*item),
		buckets: make(map[bucketKey]*bucket),
		pending: make(map[*bucket][]int32),
	}
}

func (s *state) bucket(k bucketKey) *bucket {
	b := s.buckets[k]
	if b == nil {
		b = &bucket{key: k, vecs: vecStore{dim: s.dim}}
		s.buckets[k] = b
	}
	return b
}

// put stores e with the unit vector vec, replacing any entry with e.Key, and
// returns its item.
func (s *state) put(e cache.Entry, vec []float32) *item {
	if old := s.byKey[e.Key]; old != nil {
		s.remove(old)
	}
	b := s.bucket(bucketKey{e.Partition, e.Fingerprint})
	var slot int32
	if n := len(b.free); n > 0 {
		slot, b.free = b.free[n-1], b.free[:n-1]
	} else {
		slot = int32(len(b.items))
		b.items = append(b.items, nil)
	}
	s.seq++
	it := &item{entry: e, b: b, slot: slot, seq: s.seq}
	b.vecs.set(slot, vec)
	b.items[slot] = it
	b.live++
	s.byKey[e.Key] = it
	s.age.push(it)
	s.bytes += itemBytes(e, s.dim)
	if b.g != nil || b.live > s.flatLimit {
		s.pending[b] = append(s.pending[b], slot)
	}
	return it
}

// flush links the slots put since the last flush into their graphs, and
// builds the graph of a bucket that outgrew FlatLimit. Every batch of puts
// ends with a flush, before any search.
func (s *state) flush() {
	for b, slots := range s.pending {
		switch {
		case s.buckets[b.key] != b:
			// Deleted meanwhile.
		case b.g == nil:
			if b.live > s.flatLimit {
				s.buildGraph(b)
			}
		default:
			slices.Sort(slots)
			slots = slices.Compact(slots)
			slots = slices.DeleteFunc(slots, func(slot int32) bool { return b.items[slot] == nil || b.g.has(slot, 0) })
			b.g.insertMany(slots)
		}
	}
	clear(s.pending)
}

func (s *state) buildGraph(b *bucket) {
	b.g = newGraph(&b.vecs, s.m, s.efC)
	var slots []int32
	for slot, it := range b.items {
		if it != nil {
			slots = append(slots, int32(slot))
		}
	}
	b.g.insertMany(slots)
}

// remove deletes it from its bucket, the key map and the age heap.
func (s *state) remove(it *item) {
	b := it.b
	b.items[it.slot] = nil
	b.free = append(b.free, it.slot)
	b.live--
	if b.g != nil {
		b.g.remove(it.slot)
		if b.live < s.flatLimit/2 {
			b.g = nil
			b.vecs.dropHalf()
		}
	}
	if b.live == 0 {
		delete(s.buckets, b.key)
	}
	delete(s.byKey, it.entry.Key)
	s.age.remove(it)
	s.bytes -= itemBytes(it.entry, s.dim)
}

func (s *state) deleteKey(key string) {
	if it := s.byKey[key]; it != nil {
		s.remove(it)
	}
}

// deletePartition removes every entry of partition; "" removes all.
func (s *state) deletePartition(partition string) {
	if partition == "" {
		clear(s.byKey)
		clear(s.buckets)
		s.age = s.age[:0]
		s.bytes = 0
		return
	}
	for k, b := range s.buckets {
		if k.partition != partition {
			continue
		}
		for _, it := range b.items {
			if it != nil {
				delete(s.byKey, it.entry.Key)
				s.age.remove(it)
				s.bytes -= itemBytes(it.entry, s.dim)
			}
		}
		delete(s.buckets, k)
	}
}

// evict removes the entries with the oldest Created until at most
// o.MaxEntries remain within o.MaxBytes, and returns their keys.
func (s *state) evict(o Options) []string {
	var keys []string
	for len(s.byKey) > o.MaxEntries || (s.bytes > o.MaxBytes && len(s.age) > 0) {
		it := s.age[0]
		keys = append(keys, it.entry.Key)
		s.remove(it)
	}
	return keys
}

// expired returns the keys of entries expired at now.
func (s *state) expired(now time.Time) []string {
	var keys []string
	for k, it := range s.byKey {
		if it.entry.Expired(now) {
			keys = append(keys, k)
		}
	}
	return keys
}

// search returns the best unexpired matches of q in its bucket. vec is unit.
// A graph search also hands every candidate it found, best first, to seen
// (if not nil), which must not keep the slice.
func (s *state) search(q cache.SearchQuery, vec []float32, now time.Time, seen func(*graph, []cand)) []cache.Match {
	b := s.buckets[bucketKey{q.Partition, q.Fingerprint}]
	if b == nil {
		return nil
	}
	limit := max(q.Limit, 1)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	var best []cand
	if b.g != nil {
		cs := b.g.search(vec, max(s.efSearch, limit), sc)
		if seen != nil {
			seen(b.g, cs)
		}
		for _, c := range cs {
			if c.sim < q.Threshold {
				break
			}
			if it := b.items[c.id]; it != nil && !it.entry.Expired(now) {
				best = append(best, c)
				if len(best) == limit {
					break
				}
			}
		}
	} else {
		best = b.scan(vec, q.Threshold, limit, now, sc)
	}
	out := make([]cache.Match, len(best))
	for i, c := range best {
		out[i] = cache.Match{Entry: b.items[c.id].entry, Score: c.sim}
	}
	return out
}

// scan is the exact search: every live slot, top limit by similarity.
func (b *bucket) scan(vec []float32, threshold float32, limit int, now time.Time, sc *scratch) []cand {
	top := sc.res[:0]
	for slot, it := range b.items {
		if it == nil {
			continue
		}
		sim := dot(vec, b.vecs.at(int32(slot)))
		if sim < threshold || (len(top) == limit && sim <= top[0].sim) || it.entry.Expired(now) {
			continue
		}
		top.push(cand{int32(slot), sim})
		if len(top) > limit {
			top.pop()
		}
	}
	out := make([]cand, len(top))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = top.pop()
	}
	sc.res = top
	return out
}

// ageHeap orders items by Created, oldest first, for eviction.
type ageHeap []*item

func (h ageHeap) less(i, j int) bool {
	a, b := h[i], h[j]
	if !a.entry.Created.Equal(b.entry.Created) {
		return a.entry.Created.Before(b.entry.Created)
	}
	return a.seq < b.seq
}

func (h ageHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}

func (h ageHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h ageHeap) down(i int) bool {
	start := i
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			return i > start
		}
		h.swap(i, m)
		i = m
	}
}

func (h *ageHeap) push(it *item) {
	it.heapIdx = len(*h)
	*h = append(*h, it)
	h.up(it.heapIdx)
}

func (h *ageHeap) remove(it *item) {
	i, n := it.heapIdx, len(*h)-1
	if i != n {
		h.swap(i, n)
	}
	(*h)[n] = nil
	*h = (*h)[:n]
	if i != n && !h.down(i) {
		h.up(i)
	}
	it.heapIdx = -1
}
