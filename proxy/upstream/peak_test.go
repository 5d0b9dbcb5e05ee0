package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// capacityModel is a loopback model that takes cap calls at once, each lasting
// latency, and refuses the rest with 429 + Retry-After: 1, as a provider at
// capacity does. It counts what it saw and when it answered.
type capacityModel struct {
	*fakeUpstream
	cap      atomic.Int64
	inflight atomic.Int64
	calls    atomic.Int64
	refused  atomic.Int64

	mu  sync.Mutex
	oks []time.Time
}

func startCapacityModel(t *testing.T, capacity int, latency time.Duration) *capacityModel {
	m := &capacityModel{}
	m.cap.Store(int64(capacity))
	m.fakeUpstream = startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		m.calls.Add(1)
		if m.inflight.Add(1) > m.cap.Load() {
			m.inflight.Add(-1)
			m.refused.Add(1)
			w.Header().Set("Retry-After", "1")
			reply(w, 429, `{"error":{"message":"model is at capacity","type":"rate_limit_error"}}`)
			return
		}
		time.Sleep(latency)
		m.inflight.Add(-1)
		m.mu.Lock()
		m.oks = append(m.oks, time.Now())
		m.mu.Unlock()
		ok(w, r, n)
	})
	return m
}

func (m *capacityModel) answeredBetween(from, to time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, at := range m.oks {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// tally is what an app saw.
type tally struct {
	mu                               sync.Mutex
	answered, limited, server, other int
	noRetryAfter                     int
	slowest                          time.Duration
}

func (t *tally) add(status int, retryAfter bool, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case status == 200:
		t.answered++
	case status == 429:
		t.limited++
	case status >= 500:
		t.server++
	default:
		t.other++
	}
	if (status == 429 || status == 503) && !retryAfter {
		t.noRetryAfter++
	}
	t.slowest = max(t.slowest, d)
}

// openLoop sends n requests at rate per second, each through send, and waits
// for all of them.
func openLoop(rate float64, n int, send func(i int)) {
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(i)
		}()
	}
	wg.Wait()
}

// straight sends the load to the model directly, without retries, as an app
// without the sidecar would.
func straight(t *testing.T, url string, rate float64, n int) *tally {
	var got tally
	client := &http.Client{Timeout: 30 * time.Second}
	openLoop(rate, n, func(int) {
		start := time.Now()
		req := chat("gpt-4o")
		hr, _ := http.NewRequest(http.MethodPost, url+"/chat/completions", strings.NewReader(string(req.Body)))
		resp, err := client.Do(hr)
		if err != nil {
			got.add(0, false, time.Since(start))
			return
		}
		resp.Body.Close()
		got.add(resp.StatusCode, resp.Header.Get("Retry-After") != "", time.Since(start))
	})
	return &got
}

// through sends the load through a Caller on default settings.
func through(t *testing.T, c *Caller, rate float64, n int) *tally {
	var got tally
	openLoop(rate, n, func(int) {
		start := time.Now()
		_, err := c.Do(context.Background(), chat("gpt-4o"))
		var e *Error
		switch {
		case err == nil:
			got.add(200, false, time.Since(start))
		case errors.As(err, &e):
			got.add(e.Status, e.RetryAfter >= time.Second, time.Since(start))
		default:
			got.add(0, false, time.Since(start))
		}
	})
	return &got
}

// defaultCaller routes gpt-4o to url with every caller setting at its default.
func defaultCaller(t *testing.T, url string) *Caller {
	t.Helper()
	c, err := New(oneTarget(url))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func checkPeak(t *testing.T, s, b *tally, s429, b429 int64) {
	t.Helper()
	t.Logf("straight: answered %d, 429 %d, upstream 429s %d; through: answered %d, 429 %d, 5xx %d, other %d, upstream 429s %d, slowest %s",
		s.answered, s.limited, s429, b.answered, b.limited, b.server, b.other, b429, b.slowest)
	if b.answered <= s.answered {
		t.Errorf("through answered %d, straight %d: want more", b.answered, s.answered)
	}
	if 4*b429 > s429 {
		t.Errorf("upstream 429s through = %d, want at most a quarter of straight's %d", b429, s429)
	}
	if b.server > 0 || b.other > 0 {
		t.Errorf("through: %d 5xx and %d other errors reached the app, want none", b.server, b.other)
	}
	if b.noRetryAfter > 0 {
		t.Errorf("through: %d refusals without Retry-After", b.noRetryAfter)
	}
	if limit := defaultDeadline + time.Second; b.slowest > limit {
		t.Errorf("through: slowest answer %s, past the %s deadline", b.slowest, defaultDeadline)
	}
}

// TestCapacityLimitedModelAt3x offers three times what a model with 4 slots
// answers, straight and through a Caller on default settings (no
// concurrency given).
func TestCapacityLimitedModelAt3x(t *testing.T) {
	const latency, rate, n = 50 * time.Millisecond, 240.0, 360 // capacity 80/s, offered 240/s for 1.5s
	direct := startCapacityModel(t, 4, latency)
	s := straight(t, direct.url(), rate, n)
	model := startCapacityModel(t, 4, latency)
	c := defaultCaller(t, model.url())
	b := through(t, c, rate, n)
	checkPeak(t, s, b, direct.refused.Load(), model.refused.Load())
	ts := statsOf(t, c, "gpt-4o", "a/*")
	if ts.Limit < 1 || ts.Limit > 8 || ts.ServiceRate <= 0 {
		t.Errorf("limit %.2f, service rate %.1f/s: want a limit near the model's 4 slots and a measured rate", ts.Limit, ts.ServiceRate)
	}
}

// TestCapacityDropAndRecovery drops the model from 4 slots to 1 for a second,
// then gives them back: the limit follows it down and up again.
func TestCapacityDropAndRecovery(t *testing.T) {
	const latency, rate, n = 50 * time.Millisecond, 100.0, 300 // 3 s: 80/s, 20/s, 80/s
	run := func(m *capacityModel, load func() *tally) (*tally, time.Time) {
		start := time.Now()
		go func() {
			time.Sleep(time.Second)
			m.cap.Store(1)
			time.Sleep(time.Second)
			m.cap.Store(4)
		}()
		return load(), start
	}
	direct := startCapacityModel(t, 4, latency)
	s, _ := run(direct, func() *tally { return straight(t, direct.url(), rate, n) })
	model := startCapacityModel(t, 4, latency)
	c := defaultCaller(t, model.url())
	b, start := run(model, func() *tally { return through(t, c, rate, n) })
	checkPeak(t, s, b, direct.refused.Load(), model.refused.Load())
	during := model.answeredBetween(start.Add(time.Second), start.Add(2*time.Second))
	after := model.answeredBetween(start.Add(2*time.Second+500*time.Millisecond), start.Add(3*time.Second))
	// 1 slot answers ~20 in the dropped second; 4 slots ~40 in half a second.
	if after <= during {
		t.Errorf("model answered %d in the dropped second and %d in the half second after recovery: the limit did not grow back", during, after)
	}
}

// keyedModel refuses key A with 429 + Retry-After: 120, answers key C with
// an exhausted x-ratelimit budget, and serves every other key.
func keyedModel(t *testing.T) *fakeUpstream {
	return startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.Header.Get("Authorization") {
		case "Bearer sk-a":
			w.Header().Set("Retry-After", "120")
			reply(w, 429, `{"error":{"message":"rate limit reached for requests","type":"requests"}}`)
		case "Bearer sk-c":
			w.Header().Set("x-ratelimit-remaining-requests", "0")
			w.Header().Set("x-ratelimit-reset-requests", "90s")
			ok(w, r, n)
		default:
			ok(w, r, n)
		}
	})
}

func keyed(key string) *Request {
	r := chat("gpt-4o")
	r.Header = http.Header{"Authorization": {"Bearer " + key}}
	return r
}

// TestKeysAreIsolated: a key the upstream rate limits, by a 429 with
// Retry-After or by an exhausted x-ratelimit budget on a 200, never slows
// another key on the same target; its own next request fails at once with
// the wait.
func TestKeysAreIsolated(t *testing.T) {
	up := keyedModel(t)
	opts := oneTarget(up.url())
	opts.Retry = RetryPolicy{Deadline: 5 * time.Second}
	opts.Metrics = NewMetrics(prometheus.NewRegistry())
	c := newCaller(t, opts)

	_, err := c.Do(t.Context(), keyed("sk-a"))
	var e *Error
	if !errors.As(err, &e) || e.Status != 429 || e.RetryAfter < 119*time.Second {
		t.Fatalf("key A: %v, want 429 with Retry-After about 120s", err)
	}
	if _, err := c.Do(t.Context(), keyed("sk-c")); err != nil {
		t.Fatalf("key C: %v, want its answer", err)
	}
	for _, key := range []string{"sk-b", "sk-d"} {
		start := time.Now()
		if _, err := c.Do(t.Context(), keyed(key)); err != nil {
			t.Fatalf("key %s: %v, want an answer despite keys A and C", key, err)
		}
		// Another key's limit would hold it for 120 s or the 5 s deadline.
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Errorf("key %s took %s: slowed by another key's rate limit", key, d)
		}
	}
	calls := up.count()
	for _, tt := range []struct {
		key  string
		wait time.Duration
	}{{"sk-a", 119 * time.Second}, {"sk-c", 89 * time.Second}} {
		start := time.Now()
		_, err := c.Do(t.Context(), keyed(tt.key))
		if !errors.As(err, &e) || e.Status != 429 || e.RetryAfter < tt.wait || !errors.Is(err, ErrShed) {
			t.Errorf("key %s again: %v, want 429 with Retry-After ≥ %s at once", tt.key, err, tt.wait)
		}
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Errorf("key %s again took %s, want an answer at once", tt.key, d)
		}
	}
	if got := up.count(); got != calls {
		t.Errorf("upstream calls %d → %d: a paced key reached the upstream", calls, got)
	}
	for _, s := range up.calls() {
		if strings.Contains(s.header.Get("Authorization"), "sk-b") && s.header.Get("Authorization") != "Bearer sk-b" {
			t.Errorf("key B sent as %q", s.header.Get("Authorization"))
		}
	}
	if ts := statsOf(t, c, "gpt-4o", "a/*"); ts.Sheds[ShedRateLimited] != 2 || !ts.Paced || ts.State != "closed" {
		t.Errorf("stats: sheds %v, paced %v, state %s; want 2 rate_limited sheds, paced, closed", ts.Sheds, ts.Paced, ts.State)
	}
	if c.Busy("gpt-4o", "") != true {
		t.Error("Busy = false while keys are paced")
	}
	if got := testutil.ToFloat64(opts.Metrics.Sheds.WithLabelValues("a/*", ShedRateLimited)); got != 2 {
		t.Errorf("shed_total{reason=rate_limited} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(opts.Metrics.Limits.WithLabelValues("a/*")); got < 4 {
		t.Errorf("limit gauge = %v, want the lanes' limits (≥ 4)", got)
	}
}

// TestBreakerPerModel: with a default upstream, a model that always fails
// opens its own breaker, not that of other models no route names.
func TestBreakerPerModel(t *testing.T) {
	var up *fakeUpstream
	up = startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if strings.Contains(up.calls()[n-1].body, "broken") {
			always(500)(w, r, n)
			return
		}
		ok(w, r, n)
	})
	opts := Options{Upstreams: []Upstream{{Name: "local", BaseURL: up.url()}}, DefaultUpstream: "local",
		Retry: RetryPolicy{MaxAttempts: 1, Deadline: 5 * time.Second}}
	c := newCaller(t, opts)
	for range DefaultBreakerConsecutiveFailures + 1 {
		c.Do(t.Context(), chat("broken-model"))
	}
	for range 5 {
		resp, err := c.Do(t.Context(), chat("fine-model"))
		if err != nil {
			t.Fatalf("fine-model: %v, want an answer while broken-model fails", err)
		}
		if got, want := resp.Target, "local/fine-model"; got != want {
			t.Errorf("target = %q, want %q", got, want)
		}
	}
	if ts := statsOf(t, c, DefaultModelName, "local/broken-model"); ts.State != "open" || ts.Sheds[ShedBreakerOpen] == 0 {
		t.Errorf("broken-model breaker = %s, sheds %v; want open, with breaker_open sheds", ts.State, ts.Sheds)
	}
	if got := statsOf(t, c, DefaultModelName, "local/fine-model").State; got != "closed" {
		t.Errorf("fine-model breaker = %s, want closed", got)
	}
	if !c.Busy("broken-model", "") || c.Busy("fine-model", "") {
		t.Errorf("Busy(broken) = %v, Busy(fine) = %v; want true, false", c.Busy("broken-model", ""), c.Busy("fine-model", ""))
	}
}

// TestCongestionIsNotBreakage: a target answering only 500s opens its
// breaker; one mixing 429s and 200s never does, and every request is
// answered, or refused with 429 + Retry-After once the retry budget is
// spent (retries at most three plus a tenth of the first attempts).
func TestCongestionIsNotBreakage(t *testing.T) {
	t.Run("only 500s", func(t *testing.T) {
		up := startUpstream(t, always(500))
		c := newCaller(t, oneTarget(up.url()))
		for range 3 {
			c.Do(t.Context(), chat("gpt-4o"))
		}
		if got := statsOf(t, c, "gpt-4o", "a/*").State; got != "open" {
			t.Errorf("breaker = %s after only 500s, want open", got)
		}
	})
	for _, status := range []int{429, 529} {
		// The client gets the provider's last refusal: 529 as 503 (which
		// Anthropic's shape answers as 529).
		want := status
		if status == 529 {
			want = 503
		}
		// A crowd (eight clients at once) spends the retry budget; a lone
		// client's request is retried as a good client's would be, outside it.
		for _, clients := range []int{1, 8} {
			t.Run(fmt.Sprintf("mixed %d, %d clients", status, clients), func(t *testing.T) {
				up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
					if n%2 == 1 {
						w.Header().Set("retry-after-ms", "10")
						reply(w, status, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
						return
					}
					ok(w, r, n)
				})
				opts := oneTarget(up.url())
				opts.Retry = fastRetry
				// A retry over budget waits this long at most. 2 s, not
				// less: under CI's parallel -race run a request can wait
				// 500 ms in the queue before its first attempt, and a
				// request that never reached the model says nothing about
				// congestion against breakage.
				opts.Retry.Deadline = 2 * time.Second
				c := newCaller(t, opts)
				var answered atomic.Int64
				errs := make(chan error, 40)
				var wg sync.WaitGroup
				for w := range clients {
					wg.Go(func() {
						for i := w; i < 40; i += clients {
							_, err := c.Do(t.Context(), chat("gpt-4o"))
							var e *Error
							switch {
							case err == nil:
								answered.Add(1)
							case errors.As(err, &e) && e.Status == want && e.RetryAfter > 0:
							case errors.As(err, &e) && e.Attempts == 0 && e.Status == 429 && e.RetryAfter > 0:
								// Shed, or out of time, before its first
								// attempt (a loaded machine): no refusal of the
								// provider's to pass on, so congestion's 429
								// with Retry-After.
							default:
								errs <- fmt.Errorf("request %d: %v, want an answer or a %d with Retry-After", i, err, want)
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				ts := statsOf(t, c, "gpt-4o", "a/*")
				switch {
				case clients == 1 && (answered.Load() != 40 || ts.LoneRetries != 40 || ts.Retries != 0 || ts.RetryBudgetWaits != 0):
					t.Errorf("%d of 40 answered, %d lone retries, %d retries under the budget, %d budget waits; want every request answered on its retry, outside the budget",
						answered.Load(), ts.LoneRetries, ts.Retries, ts.RetryBudgetWaits)
				case clients > 1 && (answered.Load() < 20 || ts.Retries > lane.InitialRetryBudget+40/10 || ts.RetryBudgetWaits == 0):
					t.Errorf("%d of 40 answered, %d retries, %d budget waits; want at least the 20 first attempts answered, at most 7 retries, and the budget spent",
						answered.Load(), ts.Retries, ts.RetryBudgetWaits)
				}
				if ts.State != "closed" {
					t.Errorf("breaker = %s with half the answers refused as congestion, want closed", ts.State)
				}
				if ts.RateLimited+ts.Overloaded < 20 || ts.ServerError != 0 {
					t.Errorf("stats: rate limited %d, overloaded %d, server errors %d; want the refusals counted as congestion",
						ts.RateLimited, ts.Overloaded, ts.ServerError)
				}
			})
		}
	}
}

// TestClassifyHook: a wire format's verdict adds a body retry delay and stops
// retries on a target whose quota is spent for the day.
func TestClassifyHook(t *testing.T) {
	a := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		reply(w, 429, `{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"quotaId":"PerDay"}]}}`)
	})
	b := startUpstream(t, ok)
	c := newCaller(t, twoTargets(a.url(), b.url()))
	req := chat("gpt-4o")
	req.Classify = func(status int, _ http.Header, body []byte) Verdict {
		if strings.Contains(string(body), "PerDay") {
			return Verdict{Congestion: true, RetryAfter: 3 * time.Hour, NoRetrySameTarget: true, Reason: "per-day quota"}
		}
		return Verdict{}
	}
	resp, err := c.Do(t.Context(), req)
	if err != nil {
		t.Fatalf("Do: %v, want the fallback's answer", err)
	}
	if got, want := resp.Target, "b/gpt-4o-mini"; got != want {
		t.Errorf("target = %q, want %q", got, want)
	}
	if got, want := a.count(), 1; got != want {
		t.Errorf("calls to the spent target = %d, want %d (no retry)", got, want)
	}
	// The spent target is held back for the capped delay: the next request
	// goes to the fallback without trying it.
	if _, err := c.Do(t.Context(), req); err != nil || a.count() != 1 {
		t.Errorf("second Do: %v, %d calls to the spent target; want the fallback and no new call", err, a.count())
	}
}

// TestAppTimeoutBoundsTheWait: an SDK's X-Stainless-Timeout shortens the
// deadline, so a request that would wait longer than the app does gets 429 +
// Retry-After in time, never a hang.
func TestAppTimeoutBoundsTheWait(t *testing.T) {
	model := startCapacityModel(t, 1, 100*time.Millisecond)
	c := defaultCaller(t, model.url())
	for range 3 { // the lane measures the time per answer
		if _, err := c.Do(t.Context(), chat("gpt-4o")); err != nil {
			t.Fatal(err)
		}
	}
	var got tally
	const n = 40
	var cut atomic.Int64 // 504: admitted, then cut by the deadline
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req := chat("gpt-4o")
			req.Header.Set("X-Stainless-Timeout", "1.5")
			start := time.Now()
			_, err := c.Do(context.Background(), req)
			var e *Error
			switch {
			case err == nil:
				got.add(200, false, time.Since(start))
			case errors.As(err, &e) && e.Status == http.StatusGatewayTimeout:
				cut.Add(1)
				got.add(e.Status, true, time.Since(start))
			case errors.As(err, &e):
				got.add(e.Status, e.RetryAfter >= time.Second, time.Since(start))
			default:
				got.add(0, false, time.Since(start))
			}
		})
	}
	wg.Wait()
	t.Logf("answered %d, 429 %d, other %d, slowest %s", got.answered, got.limited, got.server+got.other, got.slowest)
	// On a busy CI core an answer admitted with a measured 100 ms to spare
	// can take longer and be cut at the deadline (504). A few are timing;
	// many would mean requests reach the model with no time left to answer.
	if c := cut.Load(); c > n/10 {
		t.Errorf("%d of %d requests were cut by the deadline (504), want at most %d: requests were sent without time to answer", c, n, n/10)
	}
	if got.answered == 0 || got.limited == 0 || got.server-int(cut.Load())+got.other > 0 || got.noRetryAfter > 0 {
		t.Errorf("answered %d, 429 %d, 5xx %d, other %d, without Retry-After %d: want some answers, the rest 429 with Retry-After",
			got.answered, got.limited, got.server, got.other, got.noRetryAfter)
	}
	// 1 s of slack for a busy CI core: without the app's timeout the last
	// of 40 requests on one 100 ms slot would wait about 4 s.
	if got.slowest > 2500*time.Millisecond {
		t.Errorf("slowest request took %s, past the app's 1.5 s timeout", got.slowest)
	}
}

// TestUnlistedModelOnNamedUpstream: Request.Upstream sends a model no route
// lists to that upstream, on a target of its own there; an unknown name, or
// none, means the default upstream.
func TestUnlistedModelOnNamedUpstream(t *testing.T) {
	def, other := startUpstream(t, ok), startUpstream(t, ok)
	opts := Options{Upstreams: []Upstream{{Name: "openai", BaseURL: def.url()}, {Name: "anthropic", BaseURL: other.url()}},
		DefaultUpstream: "openai"}
	c := newCaller(t, opts)
	for _, tc := range []struct{ upstream, model, target string }{
		{"anthropic", "claude-x", "anthropic/claude-x"},
		{"", "claude-x", "openai/claude-x"},
		{"no-such-upstream", "gpt-x", "openai/gpt-x"},
		{"anthropic", "", "anthropic/*"},
	} {
		req := chat(tc.model)
		req.Upstream = tc.upstream
		resp, err := c.Do(t.Context(), req)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if resp.Target != tc.target {
			t.Errorf("%+v: target %q, want %q", tc, resp.Target, tc.target)
		}
	}
	if got := len(other.calls()); got != 2 {
		t.Errorf("anthropic upstream got %d calls, want 2", got)
	}
	if got := len(def.calls()); got != 2 {
		t.Errorf("default upstream got %d calls, want 2", got)
	}
}
