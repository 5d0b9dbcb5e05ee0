package qdrant_test

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/embedded"
	"github.com/breakwater-dev/breakwater/cache/indextest"
	bwqdrant "github.com/breakwater-dev/breakwater/cache/qdrant"
	"github.com/breakwater-dev/breakwater/cache/qdrant/qdranttest"
)

// These benchmarks back docs/BENCHMARKS.md. They run against the
// in-process fake over loopback TCP, so they measure what the Qdrant backend
// adds on the client side (protobuf encoding, a gRPC round trip, decoding the
// payload) plus the fake's brute-force scan; not Qdrant's HNSW, storage or a
// real network hop.

const (
	cmpDim       = 512
	cmpPoints    = 5000 // the lookup comparison's data set, one partition + fingerprint
	cmpKeyPool   = 4096 // distinct keys the write-back benchmark cycles through
	cmpMaxSample = 1 << 16
)

// cmpItems returns n entries of one partition and fingerprint with random
// unit vectors and a typical completion body, keys "<prefix><i>".
func cmpItems(seed uint64, prefix string, n int) []cache.IndexItem {
	rng := rand.New(rand.NewPCG(seed, 7))
	body := make([]byte, 1500)
	now := time.Now()
	items := make([]cache.IndexItem, n)
	for i := range items {
		items[i] = cache.IndexItem{
			Entry: cache.Entry{
				Key: indextest.Key(fmt.Sprint(prefix, i)), Partition: "p", Fingerprint: "f",
				Query: fmt.Sprint("question number ", i), Model: "m", Body: body,
				Created: now, Expires: now.Add(24 * time.Hour),
			},
			Vector: indextest.RandomUnit(rng, cmpDim),
		}
	}
	return items
}

func cmpQdrant(b *testing.B) *bwqdrant.Index {
	b.Helper()
	srv := qdranttest.Start(b)
	ix, err := bwqdrant.Open(b.Context(), bwqdrant.Options{
		Addr: srv.Addr(), Collection: "bench", Dimension: cmpDim, EmbedderName: "bench",
		SweepEvery: -1, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatalf("open qdrant index: %v", err)
	}
	b.Cleanup(func() { _ = ix.Close() })
	return ix
}

// cmpEmbedded is the memory-only embedded index. With BREAKWATER_BENCH_HNSW=1
// it keeps its default FlatLimit (2048), so 5k points in one bucket get an
// HNSW graph; otherwise FlatLimit is raised above cmpPoints so it scans
// exactly, like the fake.
func cmpEmbedded(b *testing.B) (*embedded.Index, string) {
	b.Helper()
	o := embedded.Options{Dimension: cmpDim, EmbedderName: "bench", SweepEvery: -1, Logger: slog.New(slog.DiscardHandler)}
	name := "embedded-hnsw"
	if os.Getenv("BREAKWATER_BENCH_HNSW") == "" {
		o.FlatLimit, name = 2*cmpPoints, "embedded-flat"
	}
	ix, err := embedded.Open(o)
	if err != nil {
		b.Fatalf("open embedded index: %v", err)
	}
	b.Cleanup(func() { _ = ix.Close() })
	return ix, name
}

// latencies records per-call durations (the first cmpMaxSample) and reports
// their p50 and p99 in microseconds.
type latencies []time.Duration

func newLatencies() latencies { return make(latencies, 0, cmpMaxSample) }

func (l *latencies) add(d time.Duration) {
	if len(*l) < cap(*l) {
		*l = append(*l, d)
	}
}

func (l latencies) report(b *testing.B) {
	b.Helper()
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	q := func(p float64) float64 { return float64(l[int(p*float64(len(l)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(q(0.50), "p50-us")
	b.ReportMetric(q(0.99), "p99-us")
}

// BenchmarkWriteBack is the write-back path's throughput: points/s upserted
// through the backend, by batch size (the cache's queue sends up to 64 per
// batch). Keys cycle through cmpKeyPool, so the collection stays bounded and
// most upserts replace an existing point, as repeated questions do.
func BenchmarkWriteBack(b *testing.B) {
	pool := cmpItems(1, "w", cmpKeyPool)
	for _, batch := range []int{1, 64, 256} {
		b.Run(fmt.Sprint("batch=", batch), func(b *testing.B) {
			ix := cmpQdrant(b)
			lat := newLatencies()
			next := 0
			b.ReportAllocs()
			for b.Loop() {
				if next+batch > len(pool) {
					next = 0
				}
				start := time.Now()
				if err := ix.Upsert(b.Context(), pool[next:next+batch]); err != nil {
					b.Fatalf("Upsert: %v", err)
				}
				lat.add(time.Since(start))
				next += batch
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "points/s")
			lat.report(b)
		})
	}
}

// BenchmarkLookupVsEmbedded runs the lookups a request makes (Get by exact
// key, then a filtered Search) against the Qdrant backend and the embedded
// index holding the same cmpPoints points, and reports per-call p50/p99.
// search-hit queries a stored vector (score 1); search-miss an unrelated
// random vector (nothing above the threshold); both scan the whole bucket.
// search-empty searches a partition with no points: the embedded index finds
// no bucket, the fake still checks the filter on every point but scores none,
// so it is close to the bare cost of a Search round trip.
func BenchmarkLookupVsEmbedded(b *testing.B) {
	data := cmpItems(2, "l", cmpPoints)
	miss := indextest.RandomUnit(rand.New(rand.NewPCG(3, 4)), cmpDim)
	hit := data[cmpPoints/2]

	qix := cmpQdrant(b)
	eix, ename := cmpEmbedded(b)
	backends := []struct {
		name string
		ix   cache.Index
	}{{ename, eix}, {"qdrant", qix}}
	for _, be := range backends {
		for i := 0; i < len(data); i += 250 {
			if err := be.ix.Upsert(b.Context(), data[i:min(i+250, len(data))]); err != nil {
				b.Fatalf("load %s: %v", be.name, err)
			}
		}
		if n, err := be.ix.Len(b.Context()); err != nil || n != cmpPoints {
			b.Fatalf("%s holds (%d, %v) points, want %d", be.name, n, err, cmpPoints)
		}
	}

	ops := []struct {
		name string
		call func(b *testing.B, ix cache.Index)
	}{
		{"get", func(b *testing.B, ix cache.Index) {
			_, ok, err := ix.Get(b.Context(), hit.Entry.Key)
			if err != nil || !ok {
				b.Fatalf("Get = (%v, %v), want found", ok, err)
			}
		}},
		{"search-hit", func(b *testing.B, ix cache.Index) {
			m, err := ix.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: hit.Vector, Threshold: 0.9, Limit: 4})
			if err != nil || len(m) == 0 || m[0].Entry.Key != hit.Entry.Key {
				b.Fatalf("Search(stored vector) = (%d matches, %v), want the stored entry first", len(m), err)
			}
		}},
		{"search-miss", func(b *testing.B, ix cache.Index) {
			m, err := ix.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: miss, Threshold: 0.9, Limit: 4})
			if err != nil || len(m) != 0 {
				b.Fatalf("Search(random vector) = (%d matches, %v), want none", len(m), err)
			}
		}},
		{"search-empty", func(b *testing.B, ix cache.Index) {
			m, err := ix.Search(b.Context(), cache.SearchQuery{Partition: "nobody", Fingerprint: "f", Vector: hit.Vector, Threshold: 0.9, Limit: 4})
			if err != nil || len(m) != 0 {
				b.Fatalf("Search(empty partition) = (%d matches, %v), want none", len(m), err)
			}
		}},
	}
	for _, op := range ops {
		for _, be := range backends {
			b.Run(op.name+"/"+be.name, func(b *testing.B) {
				lat := newLatencies()
				b.ReportAllocs()
				for b.Loop() {
					start := time.Now()
					op.call(b, be.ix)
					lat.add(time.Since(start))
				}
				lat.report(b)
			})
		}
	}
}
