package embedded

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
)

// recallAt1 searches a perturbed copy of each of queries stored vectors and
// returns the fraction whose best match is the brute-force best.
func recallAt1(t *testing.T, x *Index, items []cache.IndexItem, live func(int) bool, queries int, rng *rand.Rand) float64 {
	t.Helper()
	hits, total := 0, 0
	for total < queries {
		i := rng.IntN(len(items))
		if !live(i) {
			continue
		}
		q := indextest.Perturb(rng, items[i].Vector, 0.1)
		best, bestSim := -1, -2.0
		for j := range items {
			if live(j) {
				if s := float64(dot(q, items[j].Vector)); s > bestSim {
					best, bestSim = j, s
				}
			}
		}
		ms, err := x.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: q, Threshold: -1})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 1 && ms[0].Entry.Key == items[best].Entry.Key {
			hits++
		}
		total++
	}
	return float64(hits) / float64(total)
}

func TestHNSWRecall(t *testing.T) {
	const n, dim, queries = 2000, 64, 300
	rng := rand.New(rand.NewPCG(6, 6))
	x := open(t, Options{Dimension: dim, FlatLimit: 256, M: 16, EfConstruction: 100, EfSearch: 64, SweepEvery: -1})
	now := time.Now()
	items := make([]cache.IndexItem, n)
	for i := range items {
		items[i] = newItem(fmt.Sprint("v", i), "A", indextest.RandomUnit(rng, dim), now)
	}
	for i := 0; i < n; i += 500 {
		upsert(t, x, items[i:i+500]...)
	}
	if b := x.st.buckets[bucketKey{"A", "fp"}]; b == nil || b.g == nil {
		t.Fatal("bucket has no graph above FlatLimit")
	}
	deleted := make([]bool, n)
	live := func(i int) bool { return !deleted[i] }
	if got, min := recallAt1(t, x, items, live, queries, rng), 0.95; got < min {
		t.Errorf("recall@1 = %.3f, want >= %.2f", got, min)
	} else {
		t.Logf("recall@1 = %.3f", got)
	}

	// Delete 30% (repairing neighbours), then reuse the freed slots for new
	// vectors: recall must hold up.
	for _, i := range rng.Perm(n)[:n*3/10] {
		deleted[i] = true
		x.mu.Lock()
		x.st.deleteKey(items[i].Entry.Key)
		x.mu.Unlock()
	}
	if got, min := recallAt1(t, x, items, live, queries, rng), 0.95; got < min {
		t.Errorf("recall@1 after deleting 30%% = %.3f, want >= %.2f", got, min)
	} else {
		t.Logf("recall@1 after deletes = %.3f", got)
	}
	for i := range deleted {
		if deleted[i] {
			items[i] = newItem(fmt.Sprint("w", i), "A", indextest.RandomUnit(rng, dim), now)
			deleted[i] = false
			upsert(t, x, items[i])
		}
	}
	if got, want := len(x.st.buckets[bucketKey{"A", "fp"}].items), n; got != want {
		t.Errorf("bucket has %d slots after reuse, want %d", got, want)
	}
	if got, min := recallAt1(t, x, items, live, queries, rng), 0.95; got < min {
		t.Errorf("recall@1 after slot reuse = %.3f, want >= %.2f", got, min)
	} else {
		t.Logf("recall@1 after reuse = %.3f", got)
	}
}

// TestParallelBuildReachable checks that a graph linked by parallel workers
// leaves no node unreachable: every stored vector finds itself.
func TestParallelBuildReachable(t *testing.T) {
	const n, dim = 3000, 16
	rng := rand.New(rand.NewPCG(10, 10))
	vecs := &vecStore{dim: dim}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
		vecs.set(int32(i), indextest.RandomUnit(rng, dim))
	}
	g := newGraph(vecs, 8, 64)
	g.insertMany(ids[:n/2])
	g.insertMany(ids[n/2:]) // the second batch links into an existing graph
	sc := new(scratch)
	lost := 0
	for _, id := range ids {
		if res := g.search(vecs.at(id), 32, sc); len(res) == 0 || res[0].id != id {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d nodes do not find themselves", lost, n)
	}
}
