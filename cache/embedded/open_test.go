package embedded

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
