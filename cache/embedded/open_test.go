package embedded

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
)

// syntheticStore writes, under dir, the snapshot of n entries in one bucket
// with a graph of random links: the shape of a built index (levels drawn as
// an insert draws them, full layer-0 lists) without the cost of building
// one, for measuring how long loading takes.
func syntheticStore(tb testing.TB, dir string, o Options, n int) {
	tb.Helper()
	o, err := o.withDefaults()
	if err != nil {
		tb.Fatal(err)
	}
	s := newState(o)
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 160) + `"},"finish_reason":"stop"}]}`)
	for i := range n {
		e := cache.Entry{Key: indextest.Key(fmt.Sprint(i)), Partition: "p", Fingerprint: "f",
			Query: fmt.Sprintf("what is the answer to question number %d?", i), Model: "gpt-4o-mini", Body: body, Created: now}
		s.put(e, indextest.RandomUnit(rng, o.Dimension))
	}
	clear(s.pending)
	b := s.buckets[bucketKey{"p", "f"}]
	g := newGraph(&b.vecs, s.m, s.efC)
	g.grow(n)
	for i := range n {
		lv := g.randomLevel()
		g.levels[i] = int8(lv)
		if lv > 0 {
			g.nodes[i].upper = make([][]int32, lv)
		}
		for l := 0; l <= lv; l++ {
			links := make([]int32, 0, g.maxLinks(l))
			for range cap(links) {
				links = append(links, int32(rng.IntN(n)))
			}
			g.setLinks(int32(i), l, links)
		}
		if lv > g.maxLevel || g.entry < 0 {
			g.entry, g.maxLevel = int32(i), lv
		}
	}
	b.g = g
	if err := checkManifest(dir, o); err != nil {
		tb.Fatal(err)
	}
	if err := writeSnapshot(dir, s, o, 1); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkOpenSnapshot is start-up: Open of a store holding a snapshot of
// n entries (512 dimensions, one bucket with its graph) and an empty log.
// BREAKWATER_BENCH_OPEN lists further sizes, such as 1000000.
func BenchmarkOpenSnapshot(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if env := os.Getenv("BREAKWATER_BENCH_OPEN"); env != "" {
		for f := range strings.SplitSeq(env, ",") {
			var n int
			if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 {
				b.Fatalf("BREAKWATER_BENCH_OPEN=%q: want sizes such as 1000000", env)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			o := benchOptions(dir)
			syntheticStore(b, dir, o, n)
			fi, err := os.Stat(filepath.Join(dir, snapshotName))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(fi.Size())
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				x, err := Open(o)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if got := x.st.buckets[bucketKey{"p", "f"}]; got == nil || got.live != n || got.g == nil {
					b.Fatalf("opened store lost entries or its graph")
				}
				if err := x.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// TestReopenAnswersIdentically closes a store whose buckets went through
// deletes and slot reuse (one with a graph, one flat, one more partition)
// and reopens it from the snapshot Close wrote: the graph comes back link
// for link, and every search and Get answers exactly as before.
func TestReopenAnswersIdentically(t *testing.T) {
	const dim = 24
	dir := t.TempDir()
	o := Options{Path: dir, Dimension: dim, EmbedderName: "e", FlatLimit: 64, M: 8, EfSearch: 32, SweepEvery: -1}
	x := open(t, o)
	rng := rand.New(rand.NewPCG(5, 5))
	base := time.Unix(time.Now().Unix(), 123)
	item := func(i int, partition, fp string) cache.IndexItem {
		it := newItem(fmt.Sprint(partition, fp, i), partition, indextest.RandomUnit(rng, dim), base.Add(-time.Duration(i)*time.Second))
		it.Entry.Fingerprint = fp
		it.Entry.Model = fmt.Sprint("model-", i%3)
		if i%5 == 0 {
			it.Entry.Expires = time.Time{}
		}
		if i%7 == 0 {
			it.Entry.Body = nil
		}
		return it
	}
	var items []cache.IndexItem
	for i := range 1500 {
		items = append(items, item(i, "A", "fp"))
	}
	for i := range 30 {
		items = append(items, item(i, "B", "fp"))
		items = append(items, item(i, "A", "other"))
	}
	var gone []string // expire early, and are swept: free slots
	for i := 0; i < 1500; i += 7 {
		items[i].Entry.Expires = base.Add(time.Minute)
		gone = append(gone, items[i].Entry.Key)
	}
	upsert(t, x, items...)
	if n := x.Sweep(base.Add(time.Hour)); n != len(gone) {
		t.Fatalf("Sweep removed %d entries, want %d", n, len(gone))
	}
	for i := 1; i < 1500; i += 11 { // replaced: new vectors in reused slots
		if i%7 == 0 {
			continue
		}
		items[i].Vector = indextest.RandomUnit(rng, dim)
		upsert(t, x, items[i])
	}
	queries := make([]cache.SearchQuery, 0, 120)
	for i := range 120 {
		it := items[(i*13)%len(items)]
		queries = append(queries, cache.SearchQuery{Partition: it.Entry.Partition, Fingerprint: it.Entry.Fingerprint,
			Vector: indextest.Perturb(rng, it.Vector, 0.3), Threshold: -1, Limit: 10})
	}
	answers := func(x *Index) [][]cache.Match {
		var out [][]cache.Match
		for _, q := range queries {
			ms, err := x.Search(t.Context(), q)
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			out = append(out, ms)
		}
		return out
	}
	type graphShape struct {
		entry    int32
		maxLevel int
		levels   []int8
		links    [][]int32
	}
	shape := func(x *Index) graphShape {
		b := x.st.buckets[bucketKey{"A", "fp"}]
		if b == nil || b.g == nil {
			t.Fatal("bucket A/fp has no graph")
		}
		s := graphShape{entry: b.g.entry, maxLevel: b.g.maxLevel}
		for slot := range b.items {
			lv := int8(-1)
			if slot < len(b.g.levels) {
				lv = b.g.levels[slot]
			}
			s.levels = append(s.levels, lv)
			for l := 0; l <= int(lv); l++ {
				s.links = append(s.links, slices.Clone(b.g.links(int32(slot), l)))
			}
		}
		return s
	}
	before, beforeShape := answers(x), shape(x)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x = open(t, o)
	if got := shape(x); !reflect.DeepEqual(got, beforeShape) {
		t.Errorf("graph after reopen differs: entry %d/%d, max level %d/%d, %d/%d lists",
			got.entry, beforeShape.entry, got.maxLevel, beforeShape.maxLevel, len(got.links), len(beforeShape.links))
	}
	same := func(a, b cache.Entry) bool {
		return a.Key == b.Key && a.Partition == b.Partition && a.Fingerprint == b.Fingerprint && a.Query == b.Query &&
			a.Model == b.Model && string(a.Body) == string(b.Body) && a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires)
	}
	for i, ms := range answers(x) {
		if len(ms) != len(before[i]) || len(ms) == 0 {
			t.Fatalf("query %d: %d matches after reopen, %d before", i, len(ms), len(before[i]))
		}
		for j, m := range ms {
			if w := before[i][j]; m.Score != w.Score || !same(m.Entry, w.Entry) {
				t.Fatalf("query %d match %d: %q %v after reopen, %q %v before", i, j, m.Entry.Key, m.Score, w.Entry.Key, w.Score)
			}
		}
	}
	deleted := map[string]bool{}
	for _, k := range gone {
		deleted[k] = true
	}
	for _, it := range items {
		e, ok, err := x.Get(t.Context(), it.Entry.Key)
		if err != nil || ok == deleted[it.Entry.Key] {
			t.Fatalf("Get(%s) = %v, %v; deleted %v", it.Entry.Key, ok, err, deleted[it.Entry.Key])
		}
		if ok && !same(e, it.Entry) {
			t.Fatalf("Get(%s) after reopen = %+v, want %+v", it.Entry.Key, e, it.Entry)
		}
	}
}

// TestSnapshotRefusesInconsistentGraph writes snapshots, each with a valid
// checksum, of states the writer never produces: Open must refuse them
// with a reason instead of loading a graph whose search would index past a
// node's links, or two items under one key.
func TestSnapshotRefusesInconsistentGraph(t *testing.T) {
	const dim = 8
	tests := []struct {
		name   string
		damage func(s *state)
		want   string
	}{
		{"entry point below the top level", func(s *state) {
			g := s.buckets[bucketKey{"A", "fp"}].g
			g.maxLevel = int(g.levels[g.entry]) + 1
		}, "not on the top level"},
		{"one key twice", func(s *state) {
			b := s.buckets[bucketKey{"A", "fp"}]
			b.items[1].entry.Key = b.items[0].entry.Key
		}, "stored twice"},
		{"entry of another partition", func(s *state) {
			s.buckets[bucketKey{"A", "fp"}].items[2].entry.Partition = "B"
		}, "another partition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Path: dir, Dimension: dim, EmbedderName: "e", FlatLimit: 16, M: 4, SweepEvery: -1}
			x := open(t, o)
			rng := rand.New(rand.NewPCG(4, 4))
			var items []cache.IndexItem
			for i := range 200 {
				items = append(items, newItem(fmt.Sprint("v", i), "A", indextest.RandomUnit(rng, dim), time.Now()))
			}
			upsert(t, x, items...)
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
			oo, err := o.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			s := newState(oo)
			if _, err := loadSnapshot(dir, s, oo); err != nil {
				t.Fatal(err)
			}
			tc.damage(s)
			if err := writeSnapshot(dir, s, oo, 1); err != nil {
				t.Fatal(err)
			}
			_, err = loadSnapshot(dir, newState(oo), oo)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadSnapshot = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
