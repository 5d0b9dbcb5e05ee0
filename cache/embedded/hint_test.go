package embedded

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
)

// writeBackIndex fills an index past FlatLimit, then adds n more entries as a
// cache does (a search for each vector, then its upsert alone), and returns
// it with every item.
func writeBackIndex(t *testing.T, hints bool, n int) (*Index, []cache.IndexItem) {
	t.Helper()
	defer func(old bool) { useHints = old }(useHints)
	useHints = hints
	const dim, base = 64, 600
	rng := rand.New(rand.NewPCG(8, 8))
	x := open(t, Options{Dimension: dim, FlatLimit: 64, SweepEvery: -1})
	now := time.Now()
	var items []cache.IndexItem
	for i := range base + n {
		items = append(items, newItem(fmt.Sprint("v", i), "A", indextest.RandomUnit(rng, dim), now))
	}
	upsert(t, x, items[:base]...)
	for _, it := range items[base:] {
		if _, err := x.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: it.Vector, Threshold: 0.5, Limit: 4}); err != nil {
			t.Fatal(err)
		}
		sum := x.hints.sum(it.Vector)
		_, kept := x.hints.index[sum]
		if kept != hints {
			t.Fatalf("after a graph search with hints=%t, its candidates kept = %t", hints, kept)
		}
		upsert(t, x, it)
		if _, kept := x.hints.index[sum]; kept {
			t.Fatal("the upsert of the searched vector left its candidates behind")
		}
	}
	return x, items
}

// TestInsertFromSearchCandidates checks that entries inserted from their
// lookup's candidates are found as well as entries inserted by a walk.
func TestInsertFromSearchCandidates(t *testing.T) {
	const n = 600
	withHints, items := writeBackIndex(t, true, n)
	walked, _ := writeBackIndex(t, false, n)
	if g := withHints.st.buckets[bucketKey{"A", "fp"}].g; g == nil || len(g.hints) != 0 {
		t.Fatal("no graph, or candidates left on it after the inserts")
	}
	// Each inserted entry is its own best match.
	for _, it := range items[len(items)-n:] {
		ms, err := withHints.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: it.Vector, Threshold: -1})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || ms[0].Entry.Key != it.Entry.Key {
			t.Fatalf("searching the vector of %s did not find it first: %v", it.Entry.Key, ms)
		}
	}
	all := func(int) bool { return true }
	r1 := recallAt1(t, withHints, items, all, 300, rand.New(rand.NewPCG(9, 9)))
	r0 := recallAt1(t, walked, items, all, 300, rand.New(rand.NewPCG(9, 9)))
	t.Logf("recall@1 of perturbed queries: %.3f from search candidates, %.3f walking", r1, r0)
	if r1 < r0-0.02 {
		t.Errorf("recall@1 %.3f with inserts from search candidates, %.3f with walks", r1, r0)
	}
}

// TestSearchCandidatesStayInTheirBucket: a search in one tenant's bucket
// must not shape the links of the same vector inserted into another's.
func TestSearchCandidatesStayInTheirBucket(t *testing.T) {
	const dim, n = 64, 3000
	rng := rand.New(rand.NewPCG(10, 10))
	x := open(t, Options{Dimension: dim, FlatLimit: 64, SweepEvery: -1})
	now := time.Now()
	v := indextest.RandomUnit(rng, dim)
	for _, p := range []string{"A", "B"} {
		var items []cache.IndexItem
		for i := range n {
			items = append(items, newItem(fmt.Sprint(p, i), p, indextest.RandomUnit(rng, dim), now))
		}
		upsert(t, x, items...)
	}
	// B holds a near duplicate of v: a walk in B links v to it.
	near := newItem("near", "B", indextest.Perturb(rng, v, 0.05), now)
	upsert(t, x, near)
	if _, err := x.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: v, Threshold: 0.5, Limit: 4}); err != nil {
		t.Fatal(err)
	}
	upsert(t, x, newItem("v", "B", v, now))
	if _, kept := x.hints.index[x.hints.sum(v)]; kept {
		t.Fatal("the candidates of the search in A are still kept after the upsert into B")
	}
	b := x.st.buckets[bucketKey{"B", "fp"}]
	vSlot, nearSlot := x.st.byKey[indextest.Key("v")].slot, x.st.byKey[indextest.Key("near")].slot
	if b.g == nil || !slices.Contains(b.g.links(vSlot, 0), nearSlot) {
		t.Fatalf("v in B is not linked to its near duplicate in B: links %v, near duplicate at slot %d", b.g.links(vSlot, 0), nearSlot)
	}
}

// TestSearchCandidatesOfAnEvictedEntryAreDropped: an entry evicted in its
// own upsert, before it was linked, leaves its slot to the next entry; the
// candidates of its search must not be used to link that one.
func TestSearchCandidatesOfAnEvictedEntryAreDropped(t *testing.T) {
	const dim, n = 64, 3000
	rng := rand.New(rand.NewPCG(11, 11))
	x := open(t, Options{Dimension: dim, FlatLimit: 64, MaxEntries: n + 1, SweepEvery: -1})
	now := time.Now()
	var items []cache.IndexItem
	for i := range n {
		items = append(items, newItem(fmt.Sprint("s", i), "A", indextest.RandomUnit(rng, dim), now))
	}
	upsert(t, x, items...)
	v, w := indextest.RandomUnit(rng, dim), indextest.RandomUnit(rng, dim)
	near := newItem("near", "A", indextest.Perturb(rng, w, 0.05), now)
	upsert(t, x, near) // n+1 entries: full
	if _, err := x.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: v, Threshold: 0.5, Limit: 4}); err != nil {
		t.Fatal(err)
	}
	// Older than everything: evicted by its own upsert, before linking.
	old := newItem("old", "A", v, now.Add(-time.Hour))
	upsert(t, x, old)
	if _, ok := x.st.byKey[old.Entry.Key]; ok {
		t.Fatal("the oldest entry was not evicted")
	}
	// The next entry takes a freed slot; it must be linked by a walk, which
	// finds its near duplicate.
	upsert(t, x, newItem("w", "A", w, now))
	b := x.st.buckets[bucketKey{"A", "fp"}]
	wSlot, nearSlot := x.st.byKey[indextest.Key("w")].slot, x.st.byKey[indextest.Key("near")].slot
	if !slices.Contains(b.g.links(wSlot, 0), nearSlot) {
		t.Fatalf("w is not linked to its near duplicate: links %v, near duplicate at slot %d", b.g.links(wSlot, 0), nearSlot)
	}
}
