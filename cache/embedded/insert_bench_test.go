package embedded

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
	"github.com/breakwater-dev/breakwater/lib/cputime"
)

// BenchmarkInsert is the write-back of a semantic miss: one new entry upserted
// into a bucket that already holds n entries and a graph, on disk (the log
// append included), on the package defaults (M, EfConstruction, SyncEvery).
// One op is one Upsert of one entry, as the write-back queue does when
// misses arrive one at a time. With BREAKWATER_BENCH_REAL=1 the stored and
// inserted vectors are the QQP questions encoded by the built-in encoder
// (see BenchmarkReal; n is then the stored b questions and the inserts are
// the a questions), else random unit vectors, the harder case for a graph,
// 10,000 of them or BREAKWATER_BENCH_INSERT_N.
//
//	go test -run '^$' -bench Insert -cpu 1 ./cache/embedded/
func BenchmarkInsert(b *testing.B) {
	var stored, fresh [][]float32
	if os.Getenv("BREAKWATER_BENCH_REAL") == "1" {
		rd := loadReal(b, false)
		stored, fresh = rd.stored, rd.queries
	} else {
		n := 10_000
		if env := os.Getenv("BREAKWATER_BENCH_INSERT_N"); env != "" {
			var err error
			if n, err = strconv.Atoi(env); err != nil || n <= 2048 {
				b.Fatalf("BREAKWATER_BENCH_INSERT_N=%q: want a size above FlatLimit (2048)", env)
			}
		}
		rng := rand.New(rand.NewPCG(3, 3))
		for range n {
			stored = append(stored, indextest.RandomUnit(rng, benchDim))
		}
		for range 20_000 {
			fresh = append(fresh, indextest.RandomUnit(rng, benchDim))
		}
	}
	b.Run(fmt.Sprintf("n=%d", len(stored)), func(b *testing.B) {
		x, err := Open(Options{Path: b.TempDir(), Dimension: benchDim, EmbedderName: "bench", MaxEntries: 2_000_000, SweepEvery: -1})
		if err != nil {
			b.Fatal(err)
		}
		defer x.Close()
		body := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 1200) + `"},"finish_reason":"stop"}]}`)
		item := func(key string, v []float32) cache.IndexItem {
			return cache.IndexItem{
				Entry:  cache.Entry{Key: key, Partition: "p", Fingerprint: "f", Query: "how can I reset the password of my account before the meeting?", Model: "gpt-4o-mini", Body: body, Created: time.Now()},
				Vector: v,
			}
		}
		const batch = 1000
		for i := 0; i < len(stored); i += batch {
			items := make([]cache.IndexItem, 0, batch)
			for j := i; j < min(i+batch, len(stored)); j++ {
				items = append(items, item(fmt.Sprint("s", j), stored[j]))
			}
			if err := x.Upsert(b.Context(), items); err != nil {
				b.Fatal(err)
			}
		}
		if bk := x.st.buckets[bucketKey{"p", "f"}]; bk == nil || bk.g == nil {
			b.Fatal("the bucket has no graph: the benchmark would measure the flat scan")
		}
		rng := rand.New(rand.NewPCG(5, 5))
		one := make([]cache.IndexItem, 1)
		// The timed inserts carry phase=insert, apart from the build:
		// go tool pprof -tagfocus phase=insert
		pprof.SetGoroutineLabels(pprof.WithLabels(b.Context(), pprof.Labels("phase", "insert")))
		defer pprof.SetGoroutineLabels(b.Context())
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cputime.Process()
		for i := 0; b.Loop(); i++ {
			v := fresh[i%len(fresh)]
			if i >= len(fresh) {
				v = indextest.Perturb(rng, v, 0.05)
			}
			one[0] = item(fmt.Sprint("q", i), v)
			if err := x.Upsert(b.Context(), one); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}
