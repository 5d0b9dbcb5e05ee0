package upstream

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBreakerStopsTrafficAndRecovers(t *testing.T) {
	var healthy atomic.Bool
	primary := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if healthy.Load() {
			ok(w, r, n)
			return
		}
		always(500)(w, r, n)
	})
	fallback := startUpstream(t, ok)
	clk := newFakeClock()
	opts := twoTargets(primary.url(), fallback.url())
	opts.Retry = fastRetry
	opts.Retry.MaxAttempts = 1
	opts.Breaker = BreakerOptions{ConsecutiveFailures: 3, FailureRatio: -1, OpenFor: 10 * time.Second, HalfOpenProbes: 1}
	opts.Now = clk.now
	opts.Metrics = NewMetrics(prometheus.NewRegistry())
	c := newCaller(t, opts)
	do := func() *Response {
		t.Helper()
		resp, err := c.Do(t.Context(), chat("gpt-4o"))
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		return resp
	}

	for range 3 {
		if got, want := do().Target, "b/gpt-4o-mini"; got != want {
			t.Fatalf("target = %q, want the fallback", got)
		}
	}
	if got, want := statsOf(t, c, "gpt-4o", "a/gpt-4o").State, "open"; got != want {
		t.Fatalf("breaker = %s after 3 failures, want %s", got, want)
	}
	if got, want := testutil.ToFloat64(opts.Metrics.Breaker.WithLabelValues("a/gpt-4o")), 2.0; got != want {
		t.Errorf("breaker_state metric = %v, want %v", got, want)
	}
	for range 5 {
		do()
	}
	if got, want := primary.count(), 3; got != want {
		t.Fatalf("primary calls = %d while open, want %d (no traffic)", got, want)
	}

	// After open_for one probe goes through; it fails and the breaker re-opens.
	clk.advance(10 * time.Second)
	if got, want := statsOf(t, c, "gpt-4o", "a/gpt-4o").State, "half-open"; got != want {
		t.Fatalf("breaker = %s after open_for, want %s", got, want)
	}
	do()
	do()
	if got, want := primary.count(), 4; got != want {
		t.Fatalf("primary calls = %d, want exactly one failed probe", got)
	}
	if got, want := statsOf(t, c, "gpt-4o", "a/gpt-4o").State, "open"; got != want {
		t.Fatalf("breaker = %s after a failed probe, want %s", got, want)
	}

	// Recovery: the next probe succeeds and closes the breaker.
	healthy.Store(true)
	clk.advance(10 * time.Second)
	if got, want := do().Target, "a/gpt-4o"; got != want {
		t.Fatalf("probe target = %q, want the primary", got)
	}
	if got, want := statsOf(t, c, "gpt-4o", "a/gpt-4o").State, "closed"; got != want {
		t.Fatalf("breaker = %s after a good probe, want %s", got, want)
	}
	if got, want := do().Target, "a/gpt-4o"; got != want {
		t.Errorf("target = %q after recovery, want the primary", got)
	}
	if got, want := testutil.ToFloat64(opts.Metrics.Breaker.WithLabelValues("a/gpt-4o")), 0.0; got != want {
		t.Errorf("breaker_state metric = %v, want %v", got, want)
	}
}

func TestWeightFollowsHealth(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	a := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if failing.Load() {
			always(502)(w, r, n)
			return
		}
		ok(w, r, n)
	})
	opts := oneTarget(a.url())
	opts.Routes[0].Targets[0].Weight = 2
	opts.Retry = fastRetry
	opts.Retry.MaxAttempts = 1
	opts.Breaker.ConsecutiveFailures = -1
	opts.Breaker.FailureRatio = -1
	opts.Metrics = NewMetrics(prometheus.NewRegistry())
	c := newCaller(t, opts)
	weight := func() float64 { return statsOf(t, c, "gpt-4o", "a/*").Weight }

	c.Do(t.Context(), chat("gpt-4o"))
	if got, want := weight(), 2*0.7; !near(got, want) {
		t.Fatalf("weight after 1 failure = %v, want %v", got, want)
	}
	if got, want := testutil.ToFloat64(opts.Metrics.Weight.WithLabelValues("a/*")), 2*0.7; !near(got, want) {
		t.Errorf("weight metric = %v, want %v", got, want)
	}
	for range 12 {
		c.Do(t.Context(), chat("gpt-4o"))
	}
	if got, want := weight(), 2*weightFloor; !near(got, want) {
		t.Fatalf("weight after 13 failures = %v, want the floor %v", got, want)
	}
	failing.Store(false)
	c.Do(t.Context(), chat("gpt-4o"))
	if got, want := weight(), roundWeight(2*(weightFloor+(1-weightFloor)*weightRecovery)); !near(got, want) {
		t.Fatalf("weight after a success = %v, want %v", got, want)
	}
	for range 60 {
		c.Do(t.Context(), chat("gpt-4o"))
	}
	if got, want := weight(), 2.0; got != want {
		t.Errorf("weight after recovery = %v, want the configured %v", got, want)
	}
	if got, want := statsOf(t, c, "gpt-4o", "a/*").ConfiguredWeight, 2.0; got != want {
		t.Errorf("configured weight = %v, want %v", got, want)
	}
}

func TestPacingOnRateLimitHeaders(t *testing.T) {
	t.Run("waits for the reset", func(t *testing.T) {
		up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				w.Header().Set("x-ratelimit-remaining-requests", "0")
				w.Header().Set("x-ratelimit-reset-requests", "150ms")
			}
			ok(w, r, n)
		})
		c := newCaller(t, oneTarget(up.url()))
		for range 2 {
			if _, err := c.Do(t.Context(), chat("gpt-4o")); err != nil {
				t.Fatal(err)
			}
		}
		calls := up.calls()
		if gap := calls[1].at.Sub(calls[0].at); gap < 140*time.Millisecond || gap > 3*time.Second {
			t.Errorf("second request came %s after the first, want about the 150ms reset", gap)
		}
	})
	t.Run("prefers another target when the reset is beyond the deadline", func(t *testing.T) {
		primary := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("x-ratelimit-remaining-tokens", "0")
			w.Header().Set("x-ratelimit-reset-tokens", "6m0s")
			ok(w, r, n)
		})
		fallback := startUpstream(t, ok)
		c := newCaller(t, twoTargets(primary.url(), fallback.url()))
		first, err := c.Do(t.Context(), chat("gpt-4o"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		second, err := c.Do(t.Context(), chat("gpt-4o"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := first.Target, "a/gpt-4o"; got != want {
			t.Errorf("first target = %q, want %q", got, want)
		}
		if got, want := second.Target, "b/gpt-4o-mini"; got != want {
			t.Errorf("second target = %q, want %q", got, want)
		}
		// Waiting for the 6 min reset would end only at the deadline.
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("second request took %s, want no wait", d)
		}
		if got, want := primary.count(), 1; got != want {
			t.Errorf("primary calls = %d, want %d", got, want)
		}
	})
}

func TestSnapshotAndMetrics(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 1:
			always(503)(w, r, n)
		case 2:
			w.Header().Set("retry-after-ms", "5")
			always(429)(w, r, n)
		case 4:
			always(400)(w, r, n)
		default:
			ok(w, r, n)
		}
	})
	opts := oneTarget(up.url())
	opts.Upstreams = append(opts.Upstreams, Upstream{Name: "local", BaseURL: up.url()})
	opts.DefaultUpstream = "local"
	reg := prometheus.NewRegistry()
	opts.Metrics = NewMetrics(reg)
	c := newCaller(t, opts)
	for range 2 { // 503, 429, 200; then 400
		if _, err := c.Do(t.Context(), chat("gpt-4o")); err != nil {
			t.Fatal(err)
		}
	}

	snap := c.Snapshot()
	if got, want := len(snap), 2; got != want {
		t.Fatalf("models = %d, want %d (route + default)", got, want)
	}
	if got, want := snap[1].Name, DefaultModelName; got != want {
		t.Errorf("last model = %q, want the default pseudo-model %q", got, want)
	}
	ts := statsOf(t, c, "gpt-4o", "a/*")
	want := TargetStats{Sent: 4, Success: 1, RateLimited: 1, ServerError: 1, ClientError: 1, State: "closed", Upstream: "a"}
	if ts.Sent != want.Sent || ts.Success != want.Success || ts.RateLimited != want.RateLimited || ts.Overloaded != want.Overloaded ||
		ts.ServerError != want.ServerError || ts.ClientError != want.ClientError || ts.State != want.State || ts.Upstream != want.Upstream {
		t.Errorf("stats = %+v, want counts %+v", ts, want)
	}
	if got, want := ts.SuccessRate, 1.0/3; !near(got, want) {
		t.Errorf("success rate = %v, want %v", got, want)
	}
	if ts.LatencyP50 <= 0 || ts.LatencyP99 < ts.LatencyP50 {
		t.Errorf("latency p50 %s p99 %s, want 0 < p50 ≤ p99", ts.LatencyP50, ts.LatencyP99)
	}
	if ts.Inflight != 0 || ts.Queued != 0 {
		t.Errorf("inflight %d queued %d, want 0", ts.Inflight, ts.Queued)
	}

	for _, tt := range []struct {
		outcome string
		want    float64
	}{{"success", 1}, {"overloaded", 0}, {"server_error", 1}, {"rate_limited", 1}, {"client_error", 1}, {"timeout", 0}} {
		if got := testutil.ToFloat64(opts.Metrics.Attempts.WithLabelValues("a/*", tt.outcome)); got != tt.want {
			t.Errorf("attempts_total{outcome=%q} = %v, want %v", tt.outcome, got, tt.want)
		}
	}
	for _, tt := range []struct {
		reason string
		want   float64
	}{{"server_error", 1}, {"rate_limited", 1}} {
		if got := testutil.ToFloat64(opts.Metrics.Retries.WithLabelValues("a/*", tt.reason)); got != tt.want {
			t.Errorf("retries_total{reason=%q} = %v, want %v", tt.reason, got, tt.want)
		}
	}
	if got, want := testutil.ToFloat64(opts.Metrics.Inflight.WithLabelValues("a")), 0.0; got != want {
		t.Errorf("inflight = %v, want %v", got, want)
	}
	if got, want := testutil.CollectAndCount(opts.Metrics.Duration), 1; got != want {
		t.Errorf("duration series = %d, want %d", got, want)
	}
	if n, err := testutil.GatherAndCount(reg, "breakwater_upstream_breaker_state"); err != nil || n != 2 {
		t.Errorf("breaker_state series = %d (%v), want 2 (target + default)", n, err)
	}
}
