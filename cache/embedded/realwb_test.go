package embedded

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/lib/cputime"
)

// BenchmarkRealWriteBack builds the index of BenchmarkReal the way a cache
// fills it: one question at a time, each searched first (the lookup of a
// semantic miss, Limit 4 as cache.Cache asks) and then upserted alone (its
// write-back), on the package defaults. It builds it twice, with the
// lookup's candidates reused by the insert (hint.go) and without, and
// reports for each the CPU per question (lookup and write-back) and the
// recall of the finished index against exact search, at the default
// EfSearch. Needs BREAKWATER_BENCH_REAL=1 (see BenchmarkReal):
//
//	BREAKWATER_BENCH_REAL=1 go test -run '^$' -bench RealWriteBack -benchtime 1x -cpu 1 ./cache/embedded/
func BenchmarkRealWriteBack(b *testing.B) {
	if os.Getenv("BREAKWATER_BENCH_REAL") != "1" {
		b.Skip("needs the QQP pairs file and minutes of encoding: set BREAKWATER_BENCH_REAL=1")
	}
	rd := loadReal(b, false)
	truth := exactTop(rd.stored, rd.queries, realK)
	hi := 0
	for _, t := range truth {
		if t[0].sim >= realHiScore {
			hi++
		}
	}
	body := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 160) + `"},"finish_reason":"stop"}]}`)
	for _, hints := range []bool{false, true} {
		b.Run(fmt.Sprintf("hints=%t", hints), func(b *testing.B) {
			defer func(old bool) { useHints = old }(useHints)
			useHints = hints
			x, err := Open(Options{Dimension: benchDim, EmbedderName: "bench", MaxEntries: 2_000_000, SweepEvery: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			now := time.Now()
			one := make([]cache.IndexItem, 1)
			runtime.GC()
			cpu0 := cputime.Process()
			start := time.Now()
			for i, v := range rd.stored {
				if _, err := x.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: v, Threshold: 0.5, Limit: 4}); err != nil {
					b.Fatal(err)
				}
				one[0] = cache.IndexItem{Entry: cache.Entry{Key: rd.keys[i], Partition: "p", Fingerprint: "f", Body: body, Created: now}, Vector: v}
				if err := x.Upsert(b.Context(), one); err != nil {
					b.Fatal(err)
				}
			}
			perQuestion := float64((cputime.Process() - cpu0).Nanoseconds()) / float64(len(rd.stored))
			b.Logf("built %d entries one at a time in %v", len(rd.stored), time.Since(start).Round(time.Millisecond))
			for _, limit := range []int{1, realK} {
				b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
					benchReal(b, x, rd, truth, limit, hi)
					b.ReportMetric(perQuestion, "build-cpu-ns/question")
				})
			}
		})
	}
}
