package fleet

import (
	"slices"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/fleet/redistest"
	"github.com/breakwater-dev/breakwater/lib/cputime"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// benchBudgets are a request's usual draw: a tenant's requests and tokens
// per minute and tokens per day, and its class's requests per minute.
var benchBudgets = []Budget{
	{Name: "tenant", Tenant: Any, RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50, TokensPerDay: 1 << 52},
	{Name: "batch", Class: Any, RequestsPerMinute: 1 << 40},
}

// benchCheck is what a budget adds to one miss: the reservation before the
// call and the reconciliation after it, with p50 and p99 of the pair and
// the process CPU per request.
func benchCheck(b *testing.B, f *Fleet) {
	ctx := b.Context()
	benchPerRequest(b, func(i int) {
		r, err := f.Reserve(ctx, "tenant-0123456789abcdef", "default", 300)
		if err != nil {
			b.Fatal(err)
		}
		r.Settle(ctx, int64(250+i%100), true, false)
	})
}

// benchPerRequest runs one request's work b.N times and reports its p50
// and p99 and the process CPU per request.
func benchPerRequest(b *testing.B, work func(i int)) {
	times := make([]time.Duration, 0, b.N)
	cpu0 := cputime.Process()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		work(i)
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	cpu := cputime.Process() - cpu0
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2])/1e3, "p50-µs")
	b.ReportMetric(float64(times[len(times)*99/100])/1e3, "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// benchFleet is a fleet on a real redis-server on loopback, up.
func benchFleet(b *testing.B, bs []Budget) *Fleet {
	r := redistest.Start(b)
	f, err := New(Options{StoreOptions: StoreOptions{RedisURL: r.URL()}, Budgets: bs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !f.up.Load() {
		if time.Now().After(deadline) {
			b.Fatal("redis not up within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return f
}

// BenchmarkBudgetRedis: the check against a real redis-server on loopback
// (two round trips: reserve, reconcile).
func BenchmarkBudgetRedis(b *testing.B) {
	f := benchFleet(b, benchBudgets)
	benchCheck(b, f)
	if f.Stats().Fallbacks != 0 {
		b.Fatal("fell back to the local share during the benchmark")
	}
}

// BenchmarkBudgetLocal: the same check without Redis (budgets per
// replica, or a replica's share while Redis is down).
func BenchmarkBudgetLocal(b *testing.B) {
	f, err := New(Options{Budgets: benchBudgets})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	benchCheck(b, f)
}

// BenchmarkGateRedis: what the capacity gate adds to one attempt, against
// a real redis-server on loopback with room in the limit: the lease before
// the send (a round trip, handed over by the replica's poller; p50 and p99
// are this wait) and its release with an answer (a round trip in the
// background, in the CPU per request).
func BenchmarkGateRedis(b *testing.B) {
	f := benchFleet(b, nil)
	ctx := b.Context()
	far := time.Now().Add(time.Hour)
	benchPerRequest(b, func(int) {
		release, err := f.Acquire(ctx, "m/x", 2, far)
		if err != nil || release == nil {
			b.Fatalf("no lease: %v", err)
		}
		release(lane.Answered, false)
	})
	if s := f.Stats(); s.Gate.Bypassed != 0 || s.Gate.Lost != 0 {
		b.Fatalf("gate stats %+v: went without the gate during the benchmark", s.Gate)
	}
}
