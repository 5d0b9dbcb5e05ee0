package qdrant_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
	bwqdrant "github.com/breakwater-dev/breakwater/cache/qdrant"
	"github.com/breakwater-dev/breakwater/cache/qdrant/qdranttest"
)

// The benchmarks run against the in-process fake over loopback TCP: they
// measure the backend's encoding, gRPC round trips and batching, not
// Qdrant's HNSW search, storage or a network hop (the fake scans exactly).

const benchDim = 512

func benchIndex(b *testing.B) *bwqdrant.Index {
	b.Helper()
	srv := qdranttest.Start(b)
	ix, err := bwqdrant.Open(b.Context(), bwqdrant.Options{
		Addr: srv.Addr(), Collection: "bench", Dimension: benchDim, EmbedderName: "bench", Logger: quietLogger(),
	})
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { _ = ix.Close() })
	return ix
}

func benchItems(rng *rand.Rand, n, offset int) []cache.IndexItem {
	items := make([]cache.IndexItem, n)
	body := make([]byte, 1500) // a typical completion JSON
	for i := range items {
		items[i] = cache.IndexItem{
			Entry: cache.Entry{
				Key: indextest.Key(fmt.Sprint(offset + i)), Partition: "p", Fingerprint: fmt.Sprint("f", i%4),
				Query: "what is the capital of France", Model: "m", Body: body,
				Created: time.Now(), Expires: time.Now().Add(time.Hour),
			},
			Vector: indextest.RandomUnit(rng, benchDim),
		}
	}
	return items
}

// BenchmarkUpsert reports write-back throughput by batch size.
func BenchmarkUpsert(b *testing.B) {
	for _, batch := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprint("batch=", batch), func(b *testing.B) {
			ix := benchIndex(b)
			items := benchItems(rand.New(rand.NewPCG(1, 2)), batch, 0)
			b.ReportAllocs()
			for b.Loop() {
				if err := ix.Upsert(b.Context(), items); err != nil {
					b.Fatalf("Upsert: %v", err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "points/s")
		})
	}
}

// BenchmarkLookup reports the latency of one filtered search and one Get
// over 10,000 stored points.
func BenchmarkLookup(b *testing.B) {
	ix := benchIndex(b)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 10_000; i += 250 {
		if err := ix.Upsert(b.Context(), benchItems(rng, 250, i)); err != nil {
			b.Fatalf("Upsert: %v", err)
		}
	}
	q := indextest.RandomUnit(rng, benchDim)
	b.Run("search", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ix.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f1", Vector: q, Threshold: 0.9}); err != nil {
				b.Fatalf("Search: %v", err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		key := indextest.Key("42")
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := ix.Get(b.Context(), key); err != nil || !ok {
				b.Fatalf("Get = (%v, %v)", ok, err)
			}
		}
	})
}
