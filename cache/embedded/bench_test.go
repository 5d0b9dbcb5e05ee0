package embedded

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
)

// Benchmark knobs. The built index is cached as a snapshot under
// $BREAKWATER_BENCH_DIR (default os.TempDir()) so that only the first run
// pays for building the graph; delete breakwater-bench-* there to rebuild.
const (
	benchDim = 512
	benchM   = 16
	benchEfC = 100
)

func benchVector(i int) []float32 {
	return indextest.RandomUnit(rand.New(rand.NewPCG(99, uint64(i))), benchDim)
}

// BREAKWATER_BENCH_HALF=0 makes graph searches walk the float32 vectors
// instead of their half copy (see half.go), for comparison.

// benchOptions builds the bench index's options; BREAKWATER_BENCH_EF sets
// EfSearch (default: the package default) to trade latency for recall.
func benchOptions(path string) Options {
	ef, _ := strconv.Atoi(os.Getenv("BREAKWATER_BENCH_EF"))
	// MaxBytes: the default budget (256 MiB) holds ~100k entries of 512
	// dimensions, and would silently evict the rest of a 1M build.
	return Options{Path: path, Dimension: benchDim, EmbedderName: "bench", MaxEntries: 2_000_000, MaxBytes: 64 << 30, M: benchM, EfConstruction: benchEfC, EfSearch: ef, SweepEvery: -1}
}

// benchIndex returns an index of n entries in one bucket and the heap bytes
// it holds per entry.
func benchIndex(b *testing.B, n int) (*Index, float64) {
	b.Helper()
	base := os.Getenv("BREAKWATER_BENCH_DIR")
	if base == "" {
		base = os.TempDir()
	}
	dir := filepath.Join(base, fmt.Sprintf("breakwater-bench-%d-%d-m%d-ef%d", n, benchDim, benchM, benchEfC))
	before := heapInUse()
	start := time.Now()
	if _, err := os.Stat(filepath.Join(dir, snapshotName)); err == nil {
		x, err := Open(benchOptions(dir))
		if err != nil {
			b.Fatalf("open cached bench index (delete %s to rebuild): %v", dir, err)
		}
		b.Logf("loaded %d entries from %s in %v", n, dir, time.Since(start).Round(time.Millisecond))
		return x, float64(heapInUse()-before) / float64(n)
	}
	x, err := Open(benchOptions(""))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 160) + `"},"finish_reason":"stop"}]}`)
	const batch = 1000
	items := make([]cache.IndexItem, 0, batch)
	for i := range n {
		items = append(items, cache.IndexItem{
			Entry: cache.Entry{
				Key: indextest.Key(fmt.Sprint(i)), Partition: "p", Fingerprint: "f",
				Query: fmt.Sprintf("what is the answer to question number %d?", i), Model: "gpt-4o-mini",
				Body: body, Created: now,
			},
			Vector: benchVector(i),
		})
		if len(items) == batch || i == n-1 {
			if err := x.Upsert(b.Context(), items); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
		}
	}
	perEntry := float64(heapInUse()-before) / float64(n)
	b.Logf("built %d entries in %v", n, time.Since(start).Round(time.Millisecond))
	if err := os.MkdirAll(dir, 0o755); err == nil {
		o := benchOptions(dir)
		err := checkManifest(dir, o)
		if err == nil {
			err = writeSnapshot(dir, x.st, o, 1)
		}
		if err != nil {
			b.Logf("cache bench index: %v", err)
		}
	}
	return x, perEntry
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// benchIndexes keeps each size's index for all sub-benchmarks of a run.
var benchIndexes = map[int]struct {
	x        *Index
	perEntry float64
}{}

// BenchmarkSearch measures Search in one bucket of n entries, for queries
// that hit (a near-duplicate of a stored vector, similarity ≈ 0.99) and that
// miss (an unrelated random vector: the longest graph walk).
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		for _, kind := range []string{"hit", "miss"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, kind), func(b *testing.B) {
				if n >= 1_000_000 && os.Getenv("BREAKWATER_BENCH_1M") != "1" {
					b.Skip("1M×512 dims needs ~3 GB and a long build: set BREAKWATER_BENCH_1M=1")
				}
				benchSearch(b, n, kind == "hit")
			})
		}
	}
}

func benchSearch(b *testing.B, n int, hit bool) {
	if os.Getenv("BREAKWATER_BENCH_HALF") == "0" && len(benchIndexes) == 0 {
		useHalf = false // walk the float32 vectors, as before the half copy
	}
	bi, ok := benchIndexes[n]
	if !ok {
		bi.x, bi.perEntry = benchIndex(b, n)
		benchIndexes[n] = bi
	}
	x, perEntry := bi.x, bi.perEntry
	rng := rand.New(rand.NewPCG(7, 7))
	queries := make([][]float32, 1000)
	want := make([]string, len(queries)) // for hits: the key a query must find
	for i := range queries {
		if hit {
			j := rng.IntN(n)
			queries[i], want[i] = indextest.Perturb(rng, benchVector(j), 0.005), indextest.Key(fmt.Sprint(j))
		} else {
			queries[i] = indextest.RandomUnit(rng, benchDim)
		}
	}
	durs := make([]time.Duration, 0, 1<<16)
	found := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := i % len(queries)
		start := time.Now()
		ms, err := x.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: queries[q], Threshold: 0.9, Limit: 1})
		durs = append(durs, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if len(ms) == 1 && ms[0].Entry.Key == want[q] {
			found++
		}
	}
	b.StopTimer()
	reportLatency(b, durs)
	b.ReportMetric(perEntry, "heap-B/entry")
	if hit {
		b.ReportMetric(float64(found)/float64(len(durs)), "recall@1")
	}
}

func reportLatency(b *testing.B, durs []time.Duration) {
	b.Helper()
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	q := func(p float64) float64 { return float64(durs[int(p*float64(len(durs)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// BenchmarkScan is the exact search of one bucket at FlatLimit.
func BenchmarkScan(b *testing.B) {
	x, err := Open(Options{Dimension: benchDim, SweepEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	items := make([]cache.IndexItem, 2048)
	for i := range items {
		items[i] = cache.IndexItem{Entry: cache.Entry{Key: fmt.Sprint(i), Partition: "p", Fingerprint: "f"}, Vector: benchVector(i)}
	}
	if err := x.Upsert(b.Context(), items); err != nil {
		b.Fatal(err)
	}
	q := benchVector(5000)
	durs := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := x.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: q, Threshold: 0.9}); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, durs)
}

func BenchmarkDot512(b *testing.B) {
	x, y := benchVector(1), benchVector(2)
	var sink float32
	b.ReportAllocs()
	for b.Loop() {
		sink += dot(x, y)
	}
	_ = sink
}
