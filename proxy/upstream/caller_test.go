package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/breaker"
)

func TestRetryAfterIsHonoured(t *testing.T) {
	tests := []struct {
		name string
		// set marks a 429 with the server's hint.
		set          func(h http.Header)
		failures     int
		minGap       time.Duration // between consecutive attempts
		maxGap       time.Duration
		wantAttempts int
	}{
		{"retry-after seconds", func(h http.Header) { h.Set("Retry-After", "1") }, 2, time.Second, 1500 * time.Millisecond, 3},
		{"retry-after http date", func(h http.Header) {
			// HTTP dates have whole seconds: two seconds ahead waits between 1s and 2s.
			h.Set("Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))
		}, 1, 900 * time.Millisecond, 2500 * time.Millisecond, 2},
		{"retry-after-ms", func(h http.Header) { h.Set("retry-after-ms", "60") }, 2, 60 * time.Millisecond, 400 * time.Millisecond, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n <= tt.failures {
					tt.set(w.Header())
					reply(w, 429, `{"error":{"message":"slow down"}}`)
					return
				}
				ok(w, r, n)
			})
			c := newCaller(t, oneTarget(up.url()))
			start := time.Now()
			resp, err := c.Do(t.Context(), chat("gpt-4o"))
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if got, want := resp.Status, 200; got != want {
				t.Fatalf("status = %d, want %d", got, want)
			}
			if got, want := resp.Attempts, tt.wantAttempts; got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
			if got, min := time.Since(start), time.Duration(tt.failures)*tt.minGap; got < min {
				t.Errorf("answered after %s, want ≥ %s", got, min)
			}
			calls := up.calls()
			for i := 1; i < len(calls); i++ {
				gap := calls[i].at.Sub(calls[i-1].at)
				if gap < tt.minGap || gap > tt.maxGap {
					t.Errorf("gap before attempt %d = %s, want within [%s, %s]", i+1, gap, tt.minGap, tt.maxGap)
				}
				if got, want := calls[i].header.Get("X-Request-ID"), "req-42"; got != want {
					t.Errorf("attempt %d X-Request-ID = %q, want %q", i+1, got, want)
				}
				if calls[i].body != calls[0].body {
					t.Errorf("attempt %d body differs:\n%s\n%s", i+1, calls[i].body, calls[0].body)
				}
			}
		})
	}
}

func TestRetryAfterBeyondDeadlineSkipsTarget(t *testing.T) {
	t.Parallel()
	primary := startUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Retry-After", "30")
		reply(w, 429, `{"error":{"message":"quota"}}`)
	})
	fallback := startUpstream(t, ok)
	opts := twoTargets(primary.url(), fallback.url())
	opts.Retry = fastRetry
	opts.Retry.Deadline = 2 * time.Second
	c := newCaller(t, opts)

	start := time.Now()
	resp, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	// Waiting for the Retry-After would take 30 s, or the 2 s deadline.
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("took %s, want the fallback at once", d)
	}
	if got, want := resp.Target, "b/gpt-4o-mini"; got != want {
		t.Errorf("target = %q, want %q", got, want)
	}
	if got, want := primary.count(), 1; got != want {
		t.Errorf("primary calls = %d, want %d", got, want)
	}

	// Alone, the same target fails at once with the server's hint.
	c = newCaller(t, Options{
		Upstreams: opts.Upstreams[:1], Retry: opts.Retry,
		Routes: []Route{{Name: "gpt-4o", Targets: []Target{{Upstream: "a"}}}},
	})
	_, err = c.Do(t.Context(), chat("gpt-4o"))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Do = %v, want *Error", err)
	}
	if got, want := e.Status, 429; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := e.RetryAfter, 30*time.Second; got != want {
		t.Errorf("retry after = %s, want %s", got, want)
	}
	if !errors.Is(err, ErrNoHealthyTarget) {
		t.Errorf("errors.Is(%v, ErrNoHealthyTarget) = false", err)
	}
}

func TestServerErrorsThenSuccess(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 2 {
			always(503)(w, r, n)
			return
		}
		ok(w, r, n)
	})
	c := newCaller(t, oneTarget(up.url()))
	resp, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got, want := resp.Status, 200; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := resp.Attempts, 3; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
	if got, want := string(resp.Body), `{"id":"chatcmpl-1","object":"chat.completion"}`; got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
	calls := up.calls()
	for i, s := range calls {
		if got, want := s.header.Get("Authorization"), "Bearer sk-client"; got != want {
			t.Errorf("attempt %d Authorization = %q, want the client's", i+1, got)
		}
		if got, want := s.path, "/v1/chat/completions"; got != want {
			t.Errorf("attempt %d path = %q, want %q", i+1, got, want)
		}
		if s.body != calls[0].body || s.header.Get("X-Request-ID") != "req-42" {
			t.Errorf("attempt %d sent different bytes or request ID", i+1)
		}
	}
}

func TestClientErrorsPassThrough(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 409, 413, 422} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			up := startUpstream(t, always(status))
			fallback := startUpstream(t, ok)
			c := newCaller(t, twoTargets(up.url(), fallback.url()))
			resp, err := c.Do(t.Context(), chat("gpt-4o"))
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if got, want := resp.Status, status; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if got, want := string(resp.Body), fmt.Sprintf(`{"error":{"message":"status %d","type":"test"}}`, status); got != want {
				t.Errorf("body = %s, want %s", got, want)
			}
			if got, want := up.count(), 1; got != want {
				t.Errorf("upstream calls = %d, want %d", got, want)
			}
			if got, want := fallback.count(), 0; got != want {
				t.Errorf("fallback calls = %d, want %d", got, want)
			}
			if got, want := statsOf(t, c, "gpt-4o", "a/gpt-4o").State, "closed"; got != want {
				t.Errorf("breaker = %s, want %s", got, want)
			}
		})
	}
}

func TestConnectionRefusedFallsBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	fallback := startUpstream(t, ok)
	c := newCaller(t, twoTargets(dead, fallback.url()))
	resp, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got, want := resp.Target, "b/gpt-4o-mini"; got != want {
		t.Errorf("target = %q, want %q", got, want)
	}
	if got, want := resp.Attempts, fastRetry.MaxAttempts+1; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
	if got, want := statsOf(t, c, "gpt-4o", "a/gpt-4o").ServerError, uint64(fastRetry.MaxAttempts); got != want {
		t.Errorf("connection errors counted = %d, want %d", got, want)
	}
}

func TestResetMidBodyIsRetried(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n > 1 {
			ok(w, r, n)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\":\"chatcm")
		buf.Flush()
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST, not FIN
		}
		conn.Close()
	})
	c := newCaller(t, oneTarget(up.url()))
	resp, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got, want := resp.Attempts, 2; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
	if got, want := string(resp.Body), `{"id":"chatcmpl-1","object":"chat.completion"}`; got != want {
		t.Errorf("body = %s, want the complete second answer", got)
	}
}

func TestStallBeyondTimeoutIsRetried(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			<-r.Context().Done() // stall until the caller gives up
			return
		}
		ok(w, r, n)
	})
	opts := oneTarget(up.url())
	opts.Upstreams[0].Timeout = 50 * time.Millisecond
	c := newCaller(t, opts)
	start := time.Now()
	resp, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got, want := resp.Attempts, 2; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
	// A stall not cut by the timeout would last the 60 s default deadline.
	if d := time.Since(start); d < 50*time.Millisecond || d > 3*time.Second {
		t.Errorf("took %s, want just over the 50ms timeout", d)
	}
	if got, want := statsOf(t, c, "gpt-4o", "a/*").Timeout, uint64(1); got != want {
		t.Errorf("timeouts = %d, want %d", got, want)
	}
}

func TestDeadlineBoundsTheCall(t *testing.T) {
	tests := []struct {
		name   string
		handle func(http.ResponseWriter, *http.Request, int)
		status []int // acceptable *Error statuses
	}{
		// Either the deadline cuts a wait (504) or the next wait would not fit and
		// the caller stops early with the last upstream status: a model that
		// answers nothing but 503 is not merely congested.
		{"always 503", always(503), []int{503, 504}},
		{"always 500", always(500), []int{500, 504}},
		{"stalls", func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }, []int{504}},
	}
	const deadline = 300 * time.Millisecond
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := startUpstream(t, tt.handle)
			opts := oneTarget(up.url())
			opts.Retry = RetryPolicy{MaxAttempts: 1000, BaseDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond, Deadline: deadline}
			opts.Breaker.ConsecutiveFailures = -1
			opts.Breaker.FailureRatio = -1
			c := newCaller(t, opts)
			start := time.Now()
			_, err := c.Do(t.Context(), chat("gpt-4o"))
			// Without the deadline: up to 1000 attempts or a stall, far
			// beyond a second; the slack absorbs a busy CI core.
			if d := time.Since(start); d > deadline+time.Second {
				t.Errorf("took %s, want ≤ %s + slack", d, deadline)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Do = %v, want *Error", err)
			}
			if !slicesContains(tt.status, e.Status) {
				t.Errorf("status = %d, want one of %v (%s)", e.Status, tt.status, e.Message)
			}
			if e.RetryAfter < time.Second {
				t.Errorf("retry after = %s, want ≥ 1s", e.RetryAfter)
			}
		})
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestClientCancellationStopsAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		handle func(http.ResponseWriter, *http.Request, int)
	}{
		{"during an attempt", func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() }},
		{"during a backoff", func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("retry-after-ms", "2000")
			reply(w, 429, `{}`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cancelled := make(chan struct{}, 1)
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
				tt.handle(w, r, n)
				if r.Context().Err() != nil {
					cancelled <- struct{}{}
				}
			})
			fallback := startUpstream(t, ok)
			c := newCaller(t, twoTargets(up.url(), fallback.url()))
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(30*time.Millisecond, cancel)
			start := time.Now()
			_, err := c.Do(ctx, chat("gpt-4o"))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Do = %v, want context.Canceled", err)
			}
			// At once: well before the 2 s backoff or an upstream that never
			// answers; 1 s leaves room for a busy CI core under -race.
			if d := time.Since(start); d > time.Second {
				t.Errorf("returned after %s, want at once", d)
			}
			time.Sleep(30 * time.Millisecond) // room for a wrong extra attempt
			if got, want := up.count()+fallback.count(), 1; got != want {
				t.Errorf("upstream calls = %d, want %d", got, want)
			}
			if tt.name == "during an attempt" {
				select {
				case <-cancelled:
				case <-time.After(10 * time.Second):
					t.Error("the upstream request was not cancelled")
				}
			}
		})
	}
}

func TestModelRewrittenForFallback(t *testing.T) {
	primary := startUpstream(t, always(503))
	fallback := startUpstream(t, ok)
	opts := twoTargets(primary.url(), fallback.url())
	opts.Retry = fastRetry
	opts.Retry.MaxAttempts = 2
	c := newCaller(t, opts)
	resp, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got, want := resp.Model, "gpt-4o-mini"; got != want {
		t.Errorf("model = %q, want %q", got, want)
	}
	if got, want := resp.Attempts, 3; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
	if got, want := primary.calls()[0].body, string(chat("gpt-4o").Body); got != want {
		t.Errorf("primary body = %s, want unchanged %s", got, want)
	}
	if got, want := fallback.calls()[0].body, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`; got != want {
		t.Errorf("fallback body = %s, want %s", got, want)
	}
}

func TestUnknownModel(t *testing.T) {
	routed := startUpstream(t, ok)
	def := startUpstream(t, ok)
	opts := oneTarget(routed.url())
	opts.Upstreams = append(opts.Upstreams, Upstream{Name: "local", BaseURL: def.url(), APIKey: "sk-local"})
	opts.DefaultUpstream = "local"
	c := newCaller(t, opts)
	req := chat("llama-3")
	req.Path = "/v1/embeddings"
	resp, err := c.Do(t.Context(), req)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got, want := resp.Target, "local/llama-3"; got != want {
		t.Errorf("target = %q, want %q", got, want)
	}
	s := def.calls()[0]
	if got, want := s.body, string(req.Body); got != want {
		t.Errorf("body = %s, want unchanged", got)
	}
	if got, want := s.path, "/v1/embeddings"; got != want {
		t.Errorf("path = %q, want %q", got, want)
	}
	if got, want := s.header.Get("Authorization"), "Bearer sk-local"; got != want {
		t.Errorf("Authorization = %q, want the upstream's key", got)
	}
	if got, want := routed.count(), 0; got != want {
		t.Errorf("routed upstream calls = %d, want %d", got, want)
	}

	c = newCaller(t, oneTarget(routed.url()))
	_, err = c.Do(t.Context(), chat("llama-3"))
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrUnknownModel) || e.Status != 404 {
		t.Fatalf("Do = %v, want a 404 *Error matching ErrUnknownModel", err)
	}
}

func TestPriorityOrder(t *testing.T) {
	primary := startUpstream(t, ok)
	fallback := startUpstream(t, ok)
	c := newCaller(t, twoTargets(primary.url(), fallback.url()))
	for range 20 {
		if _, err := c.Do(t.Context(), chat("gpt-4o")); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := primary.count(), 20; got != want {
		t.Errorf("primary calls = %d, want %d", got, want)
	}
	if got, want := fallback.count(), 0; got != want {
		t.Errorf("fallback calls = %d, want %d", got, want)
	}
}

func TestWeightedSplit(t *testing.T) {
	a := startUpstream(t, ok)
	b := startUpstream(t, ok)
	c := newCaller(t, Options{
		Upstreams: []Upstream{{Name: "a", BaseURL: a.url()}, {Name: "b", BaseURL: b.url()}},
		Routes: []Route{{Name: "gpt-4o", Targets: []Target{
			{Upstream: "a", Weight: 3}, {Upstream: "b", Weight: 1},
		}}},
		Rand: seeded(7),
	})
	const n = 2000
	for range n {
		if _, err := c.Do(t.Context(), chat("gpt-4o")); err != nil {
			t.Fatal(err)
		}
	}
	share := float64(a.count()) / n
	if share < 0.75-0.05 || share > 0.75+0.05 {
		t.Errorf("share of a = %.3f over %d requests, want 0.75 ± 0.05", share, n)
	}
	if got, want := a.count()+b.count(), n; got != want {
		t.Errorf("calls = %d, want %d", got, want)
	}
}

func TestAllTargetsOpen(t *testing.T) {
	hold := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 2 {
			<-hold // the last-resort attempt stays in flight
		}
		always(500)(w, r, n)
	})
	opts := oneTarget(up.url())
	opts.Retry = fastRetry
	opts.Retry.MaxAttempts = 1
	opts.Breaker = BreakerOptions{ConsecutiveFailures: 1, OpenFor: time.Minute}
	clk := newFakeClock()
	opts.Now = clk.now
	c := newCaller(t, opts)
	if _, err := c.Do(t.Context(), chat("gpt-4o")); !errors.Is(err, ErrNoHealthyTarget) {
		t.Fatalf("first Do = %v, want an upstream error", err)
	}
	// Right after opening, nothing goes through.
	if _, err := c.Do(t.Context(), chat("gpt-4o")); !errors.Is(err, ErrNoHealthyTarget) || up.count() != 1 {
		t.Fatalf("Do right after opening = %v with %d upstream calls, want a refusal and 1 call", err, up.count())
	}
	// The breaker is open and there is no other target: one attempt at a time,
	// one a second, still goes through, so a model that answers some requests
	// is not cut off.
	clk.advance(breaker.LastResortEvery)
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(context.Background(), chat("gpt-4o"))
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for up.count() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no last-resort attempt reached the upstream")
		}
		time.Sleep(time.Millisecond)
	}
	_, err := c.Do(t.Context(), chat("gpt-4o"))
	close(hold)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Do = %v, want *Error", err)
	}
	if got, want := e.Status, 503; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := e.Code, CodeNoHealthyTarget; got != want {
		t.Errorf("code = %q, want %q", got, want)
	}
	if e.RetryAfter < 58*time.Second || e.RetryAfter > time.Minute {
		t.Errorf("retry after = %s, want about the 1m open_for", e.RetryAfter)
	}
	if !strings.Contains(e.Message, "a/*: circuit open") {
		t.Errorf("message = %q, want it to name the open target", e.Message)
	}
	if err := <-done; !errors.Is(err, ErrNoHealthyTarget) {
		t.Errorf("last-resort Do = %v, want the upstream's error", err)
	}
	if got, want := up.count(), 2; got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

// readLines is a tiny SSE reader for the stream tests.
func readLines(t *testing.T, s *StreamResponse) ([]string, error) {
	t.Helper()
	var lines []string
	sc := bufio.NewScanner(s.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

func TestContextDeadlineWinsWhenEarlier(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() })
	c := newCaller(t, oneTarget(up.url())) // Retry.Deadline is 5s
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Do(ctx, chat("gpt-4o"))
	// The caller's own deadline would end it only at 5 s.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s, want about the context's 100ms", d)
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = %v, want a deadline_exceeded *Error", err)
	}
	if got, want := up.count(), 1; got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

// Issue 39: a request the lane held for want of room at the model, and shed
// when its deadline came, was never sent: the app gets congestion's 429 with
// Retry-After, not a 504 deadline, even from a target that has not answered
// lately (a fleet replica that lost its share of a model others are using).
func TestNeverSentIsCongestionNotDeadline(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		ok(w, r, 0)
	})
	defer close(release)
	o := oneTarget(up.url())
	o.Upstreams[0].MaxConcurrency = 1
	o.Retry = RetryPolicy{MaxAttempts: 3, BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Deadline: 5 * time.Second}
	c := newCaller(t, o)
	go c.Do(t.Context(), chat("gpt-4o")) //nolint:errcheck // holds the only slot
	for up.count() == 0 {
		runtime.Gosched()
	}
	req := chat("gpt-4o")
	req.Header.Set("X-Breakwater-Timeout", "0.5")
	_, err := c.Do(t.Context(), req)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Do = %v, want an *Error", err)
	}
	if e.Status != http.StatusTooManyRequests || e.Code != CodeCapacityExceeded || e.RetryAfter < time.Second || e.Attempts != 0 {
		t.Errorf("got status %d code %s retry-after %s attempts %d (%s), want 429 %s, ≥ 1s, 0 attempts",
			e.Status, e.Code, e.RetryAfter, e.Attempts, e.Message, CodeCapacityExceeded)
	}
	if got := up.count(); got != 1 {
		t.Errorf("upstream calls = %d, want 1 (the held request never sent)", got)
	}
}

// TestDeadlineAtARefusingModelIsCongestion: a request cut by its deadline at
// a target that has only refused for want of room lately (it never answered
// this replica: a fleet replica that lost its share) gets 429 with
// Retry-After, as congestion, not 504 as if the model were down.
func TestDeadlineAtARefusingModelIsCongestion(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 { // no Retry-After: nothing holds the lane
			reply(w, 429, `{"error":{"message":"model is at capacity","type":"rate_limit_error"}}`)
			return
		}
		<-r.Context().Done() // full: the next request stalls past its deadline
	})
	o := oneTarget(up.url())
	o.Retry = RetryPolicy{MaxAttempts: 1, Deadline: 5 * time.Second}
	c := newCaller(t, o)
	if _, err := c.Do(t.Context(), chat("gpt-4o")); err == nil {
		t.Fatal("the refused request succeeded")
	}
	req := chat("gpt-4o")
	req.Header.Set("X-Breakwater-Timeout", "1")
	_, err := c.Do(t.Context(), req)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Do = %v, want an *Error", err)
	}
	if e.Status != http.StatusTooManyRequests || e.Code != CodeDeadlineExceeded || e.RetryAfter < time.Second {
		t.Errorf("got status %d code %s retry-after %s (%s), want 429 %s with Retry-After", e.Status, e.Code, e.RetryAfter, e.Message, CodeDeadlineExceeded)
	}
}
