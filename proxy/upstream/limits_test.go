package upstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blocking answers 200 once release is closed (or the caller gives up), but only
// for bodies containing "slow"; others answer at once.
func blocking(release <-chan struct{}) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, n int) {
		if strings.Contains(r.Header.Get("X-Test-Mode"), "slow") {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		ok(w, r, n)
	}
}

func slow(req *Request) *Request {
	req.Header.Set("X-Test-Mode", "slow")
	return req
}

func TestFullQueueShedsAtOnce(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, blocking(release))
	opts := oneTarget(up.url())
	opts.Upstreams[0].MaxConcurrency = 1
	opts.Upstreams[0].MaxQueue = 1
	c := newCaller(t, opts)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, err := c.Do(t.Context(), slow(chat("gpt-4o")))
			errs <- err
		})
		// Start them one at a time so the first is in flight and the second queued.
		waitUntil(t, func() bool { s := statsOf(t, c, "gpt-4o", "a/*"); return s.Inflight+s.Queued == i+1 })
	}
	if s := statsOf(t, c, "gpt-4o", "a/*"); s.Inflight != 1 || s.Queued != 1 {
		t.Fatalf("inflight %d queued %d, want 1 and 1", s.Inflight, s.Queued)
	}

	start := time.Now()
	_, err := c.Do(t.Context(), chat("gpt-4o"))
	// At once: a wrong wait would last until release, which never comes
	// before this check; 1 s only absorbs a busy CI core under -race.
	if d := time.Since(start); d > time.Second {
		t.Errorf("shed took %s, want at once", d)
	}
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrShed) {
		t.Fatalf("Do = %v, want a shed *Error", err)
	}
	if got, want := e.Status, 429; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := e.Code, CodeCapacityExceeded; got != want {
		t.Errorf("code = %q, want %q", got, want)
	}
	if e.RetryAfter < time.Second {
		t.Errorf("retry after = %s, want ≥ 1s", e.RetryAfter)
	}
	if got, want := e.Message, "breakwater: the queue for a/* is full (1 waiting for 1 slots of its adaptive limit); retry after 1s or raise max_queue"; got != want {
		t.Errorf("message = %q\nwant        %q", got, want)
	}

	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("queued request: %v", err)
		}
	}
	if got, want := statsOf(t, c, "gpt-4o", "a/*").Shed, uint64(1); got != want {
		t.Errorf("shed = %d, want %d", got, want)
	}
	if got, want := up.count(), 2; got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

func TestPoolsAreIsolated(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := startUpstream(t, blocking(release))
	opts := oneTarget(up.url())
	opts.Upstreams[0].MaxConcurrency = 8
	opts.Upstreams[0].Pools = map[string]PoolLimits{
		"batch":    {MaxConcurrency: 1, MaxQueue: -1},
		"realtime": {MaxConcurrency: 2},
	}
	c := newCaller(t, opts)
	// A lane that has learnt the upstream takes more than its first one
	// request at once: the pools, not the lane, are under test.
	tg := c.routes["gpt-4o"].flat[0].t
	tg.laneFor(laneKey(chat("gpt-4o").Header, tg.up.cfg)).Learnt(8)

	batch := func() *Request { r := slow(chat("gpt-4o")); r.Class = "batch"; return r }
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Do(ctx, batch())
	}()
	waitUntil(t, func() bool { return statsOf(t, c, "gpt-4o", "a/*").Inflight == 1 })

	if _, err := c.Do(t.Context(), batch()); !errors.Is(err, ErrShed) {
		t.Fatalf("second batch request = %v, want shed", err)
	}
	for _, class := range []string{"realtime", "", "unknown-class"} {
		req := chat("gpt-4o")
		req.Class = class
		start := time.Now()
		resp, err := c.Do(t.Context(), req)
		if err != nil {
			t.Fatalf("class %q while batch is full: %v", class, err)
		}
		if got, want := resp.Status, 200; got != want {
			t.Errorf("class %q status = %d, want %d", class, got, want)
		}
		// A wrong wait behind the full batch queue lasts until cancel()
		// below; 1 s only absorbs a busy CI core.
		if d := time.Since(start); d > time.Second {
			t.Errorf("class %q took %s, want no wait", class, d)
		}
	}
	cancel()
	<-done
}

// TestOverloadNeverExceedsTheLimit is the overload scenario at the
// caller's level: 200 concurrent requests, an upstream limited to 4 in flight.
func TestOverloadNeverExceedsTheLimit(t *testing.T) {
	var inflight, peak atomic.Int64
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		cur := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
		ok(w, r, n)
	})
	opts := oneTarget(up.url())
	opts.Upstreams[0].MaxConcurrency = 4
	opts.Upstreams[0].MaxQueue = 16
	opts.Retry = fastRetry
	opts.Retry.Deadline = time.Second
	c := newCaller(t, opts)

	const n = 200
	var okCount, shed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			start := time.Now()
			resp, err := c.Do(t.Context(), chat("gpt-4o"))
			// Slack of one more deadline for 200 goroutines on a busy CI
			// core; ignoring the deadline would take 200 × 10 ms ÷ 4 plus
			// retries, and show as peak > 4 or errors below as well.
			if d := time.Since(start); d > 2*opts.Retry.Deadline {
				t.Errorf("request took %s, beyond the deadline", d)
			}
			var e *Error
			switch {
			case err == nil && resp.Status == 200:
				okCount.Add(1)
			case errors.As(err, &e) && e.Status == 429 && e.RetryAfter >= time.Second:
				shed.Add(1)
			default:
				t.Errorf("Do = %v, %v; want 200 or a 429 with Retry-After", resp, err)
			}
		})
	}
	wg.Wait()
	if got, limit := peak.Load(), int64(4); got > limit {
		t.Errorf("upstream saw %d in flight, want ≤ %d", got, limit)
	}
	if got, want := okCount.Load()+shed.Load(), int64(n); got != want {
		t.Errorf("answered %d, want %d", got, want)
	}
	// At least the lane's cold slots plus the queue are served (the limit
	// starts there and grows as answers come).
	if okCount.Load() < ColdSlots+16 || shed.Load() == 0 {
		t.Errorf("%d ok, %d shed; want at least the slots plus the queue served and some shed", okCount.Load(), shed.Load())
	}
	t.Logf("200 concurrent: %d answered, %d shed with 429, peak in flight %d", okCount.Load(), shed.Load(), peak.Load())
}
