package upstream

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestCallerCountsRequestsOnTheLane: a request counts on its lane from its
// first attempt until it leaves the target, through the Retry-After between
// its attempts, and a live stream until its body ends.
func TestCallerCountsRequestsOnTheLane(t *testing.T) {
	first := make(chan struct{})
	resume := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			close(first)
			<-resume
			w.Header().Set("Retry-After-Ms", "10")
			reply(w, 429, `{"error":{"type":"rate_limit_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := newCaller(t, oneTarget(up.url()))
	req := chat("gpt-4o")
	tg := c.routes["gpt-4o"].flat[0].t
	l := tg.laneFor(laneKey(req.Header, tg.up.cfg))
	present := l.Present
	type opened struct {
		s   *StreamResponse
		err error
	}
	got := make(chan opened, 1)
	go func() {
		s, err := c.Open(context.Background(), req)
		got <- opened{s, err}
	}()
	<-first
	if n := present(); n != 1 {
		t.Errorf("present %d during its first attempt, want 1", n)
	}
	close(resume)
	o := <-got
	if o.err != nil {
		t.Fatal(o.err)
	}
	if n := present(); n != 1 {
		t.Errorf("present %d while its stream is live, want 1", n)
	}
	o.s.Done(nil)
	if n := present(); n != 0 {
		t.Errorf("present %d after the stream ended, want 0", n)
	}
}

// TestRefusalNotDeadline: a request whose deadline runs out after the
// provider refused it ends with that refusal (its status, Retry-After), not
// with a deadline error: here its retry hangs until the deadline cuts it.
func TestRefusalNotDeadline(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After-Ms", "10")
			reply(w, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		<-r.Context().Done()
	})
	opts := oneTarget(up.url())
	opts.Retry = fastRetry
	opts.Retry.Deadline = 300 * time.Millisecond
	c := newCaller(t, opts)
	_, err := c.Do(t.Context(), chat("gpt-4o"))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an *Error", err)
	}
	if e.Status != 503 || e.Code != CodeUpstreamError || errors.Is(err, context.DeadlineExceeded) || e.RetryAfter <= 0 || e.Attempts != 2 {
		t.Errorf("status %d code %s attempts %d retry after %s (%v); want the 529 refusal as 503 upstream_error with Retry-After after 2 attempts",
			e.Status, e.Code, e.Attempts, e.RetryAfter, err)
	}
}
