package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/fleet/redistest"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

func newFleet(t *testing.T, url string, bs ...Budget) *Fleet {
	t.Helper()
	f, err := New(Options{StoreOptions: StoreOptions{RedisURL: url, Prefix: "t" + t.Name()}, Budgets: bs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// waitFor polls cond until it holds, failing after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func shared(t *testing.T, fs ...*Fleet) {
	t.Helper()
	waitFor(t, "every replica counts the others", func() bool {
		for _, f := range fs {
			if !f.up.Load() || f.live.Load() != int64(len(fs)) {
				return false
			}
		}
		return true
	})
}

// Four replicas reserving one tenant's 60 requests a minute at once admit
// 60 (plus what a minute's refill adds while they run), not 4 × 60; another
// tenant keeps its own budget.
func TestBudgetSharedAcrossReplicas(t *testing.T) {
	r := redistest.Start(t)
	b := Budget{Name: "rpm", Tenant: Any, RequestsPerMinute: 60}
	fs := []*Fleet{newFleet(t, r.URL(), b), newFleet(t, r.URL(), b), newFleet(t, r.URL(), b), newFleet(t, r.URL(), b)}
	shared(t, fs...)
	var admitted, refused atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	// 16 at a time, as a fleet's misses come: more than a pool's worth of
	// concurrent calls on a loaded machine would wait past the timeout for
	// a connection, and be decided locally, as a fault would.
	var next atomic.Int64
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= 200; i = next.Add(1) {
				res, err := fs[i%int64(len(fs))].Reserve(t.Context(), "tenant-a", "", 10)
				var ue *upstream.Error
				var ex *Exceeded
				switch {
				case err == nil && res != nil:
					admitted.Add(1)
				case errors.As(err, &ue) && ue.Status == 429 && errors.As(err, &ex) && ex.Limit == "requests":
					refused.Add(1)
				default:
					t.Errorf("reserve: %v, %v", res, err)
				}
			}
		})
	}
	wg.Wait()
	refill := time.Since(start).Seconds() // one request a second
	// A call past the 50 ms bound (a loaded machine, -race) decides its
	// request by the replica's share: counted, and at most one more each.
	var local uint64
	for _, f := range fs {
		local += f.Stats().Fallbacks
	}
	if a := float64(admitted.Load()); a < 60-float64(local) || a > 60+refill+1+float64(local) {
		t.Errorf("admitted %v of 200 across 4 replicas (%d decided locally); want 60 (+%.1f refilled)", a, local, refill)
	}
	if refused.Load() == 0 {
		t.Error("nothing refused")
	}
	if _, err := fs[0].Reserve(t.Context(), "tenant-b", "", 10); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	if local > 100 {
		t.Errorf("%d of 200 reservations decided locally with Redis up", local)
	}
}

// A token budget is reconciled with the usage reported, and refunded when
// the call failed.
func TestReconcileAndRefund(t *testing.T) {
	r := redistest.Start(t)
	f := newFleet(t, r.URL(), Budget{Name: "tpm", Tenant: "a", TokensPerMinute: 1000})
	shared(t, f)
	ctx := t.Context()
	res, err := f.Reserve(ctx, "a", "", 900)
	if err != nil {
		t.Fatal(err)
	}
	// The estimate was high: 100 used, 800 back.
	res.Settle(ctx, 100, true, false)
	res, err = f.Reserve(ctx, "a", "", 800)
	if err != nil {
		t.Fatalf("after reconciling 900 to 100, 800 more: %v", err)
	}
	res.Settle(ctx, 0, false, true) // failed: all back
	if _, err := f.Reserve(ctx, "a", "", 800); err != nil {
		t.Fatalf("after a refund: %v", err)
	}
	_, err = f.Reserve(ctx, "a", "", 800)
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Limit != "tokens" || ex.Max != 1000 || ex.RetryAfter < time.Second {
		t.Fatalf("over budget: %v (%+v)", err, ex)
	}
	if h := ex.Headers(); h.Get("X-Ratelimit-Limit-Tokens") != "1000" || h.Get("X-Ratelimit-Remaining-Tokens") == "" {
		t.Errorf("headers %v", h)
	}
}

// Behind 200 ms of latency, no reservation waits past the timeout: it is
// decided by the local share, and counted.
func TestSlowRedisNeverDelays(t *testing.T) {
	r := redistest.Start(t)
	d := redistest.NewDelay(t, r.Addr)
	f := newFleet(t, "redis://"+d.Addr, Budget{Tenant: Any, RequestsPerMinute: 600})
	shared(t, f)
	d.Set(200 * time.Millisecond)
	var worst time.Duration
	for range 20 {
		t0 := time.Now()
		if _, err := f.Reserve(context.Background(), "a", "", 1); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(t0))
	}
	if worst >= 200*time.Millisecond {
		t.Errorf("a reservation waited %v behind a 200ms Redis; bound %v", worst, DefaultTimeout)
	}
	if s := f.Stats(); s.Faults == 0 || s.Fallbacks == 0 {
		t.Errorf("stats %+v: want the timeout counted as a fault and the requests as fallbacks", s)
	}
	d.Set(0)
	waitFor(t, "sharing resumes when Redis is fast again", f.up.Load)
}

// Without Redis, a budget applies per replica.
func TestLocalBudget(t *testing.T) {
	f := newFleet(t, "", Budget{Class: "batch", RequestsPerMinute: 5})
	n := 0
	for range 20 {
		if _, err := f.Reserve(t.Context(), "x", "batch", 1); err == nil {
			n++
		}
	}
	if n < 5 || n > 6 {
		t.Errorf("admitted %d; want 5", n)
	}
	if res, err := f.Reserve(t.Context(), "x", "realtime", 1); err != nil || res != nil {
		t.Errorf("another class: %v, %v; want no budget", res, err)
	}
	if f.Shared() || f.Stats().Store != "local" {
		t.Error("no redis_url: not shared")
	}
}

func TestEstimate(t *testing.T) {
	for _, c := range []struct {
		body string
		want int64
	}{
		{`{"model":"m","max_tokens":100}`, int64(len(`{"model":"m","max_tokens":100}`)/4) + 1 + 100},
		{`{"generationConfig":{"maxOutputTokens":50}}`, int64(len(`{"generationConfig":{"maxOutputTokens":50}}`)/4) + 1 + 50},
		{`{"model":"m"}`, int64(len(`{"model":"m"}`)/4) + 1},
	} {
		if got := Estimate(&upstream.Request{Body: []byte(c.body)}); got != c.want {
			t.Errorf("Estimate(%s) = %d, want %d", c.body, got, c.want)
		}
	}
	for body, want := range map[string]uint64{
		`{"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`:       7,
		`{"usage":{"input_tokens":3,"cache_read_input_tokens":2,"output_tokens":4}}`: 9,
		`{"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4}}`:          7,
	} {
		if u := ReadUsage([]byte(body)); !u.Known || u.Input+u.Output != want {
			t.Errorf("ReadUsage(%s) = %+v, want %d", body, u, want)
		}
	}
	// The wire API's own estimate and usage reader win over the fallbacks.
	req := &upstream.Request{
		Body:  []byte(`{"model":"m","max_tokens":100}`),
		Cost:  upstream.Cost{Input: 40, Output: 100},
		Usage: func([]byte) (int, int, bool) { return 30, 5, true },
	}
	if got := Estimate(req); got != 140 {
		t.Errorf("Estimate with the API's cost = %d, want 140", got)
	}
	if u := usageOf(req, []byte(`{"usage":{"prompt_tokens":3,"completion_tokens":4}}`)); !u.Known || u.Input != 30 || u.Output != 5 {
		t.Errorf("usageOf with the API's reader = %+v, want 30 in and 5 out", u)
	}
}

// A replica that loses Redis goes on from what it took of its share while
// Redis decided, not from a full bucket: a flapping Redis does not admit a
// share more at every flap.
func TestFallbackStartsFromWhatWasTaken(t *testing.T) {
	r := redistest.Start(t)
	f := newFleet(t, r.URL(), Budget{Tenant: "a", RequestsPerMinute: 10})
	shared(t, f)
	for i := range 10 {
		if _, err := f.Reserve(t.Context(), "a", "", 1); err != nil {
			t.Fatalf("request %d of 10: %v", i+1, err)
		}
	}
	r.Kill()
	waitFor(t, "Redis is seen down", func() bool { return !f.up.Load() })
	if _, err := f.Reserve(t.Context(), "a", "", 1); err == nil {
		t.Error("an 11th request admitted by the local share after Redis admitted the whole budget")
	}
	if s := f.Stats(); s.Fallbacks != 1 {
		t.Errorf("stats %+v: want the request counted as decided locally", s)
	}
}
