package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRetryAfterHoldsTheLane: a 429 asking for a wait holds every request of
// the lane, not only the refused one: a request that arrives meanwhile is
// not sent before the wait is over.
func TestRetryAfterHoldsTheLane(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := newCaller(t, oneTarget(srv.URL+"/v1"))
	first := make(chan error, 1)
	go func() {
		_, err := c.Do(context.Background(), chat("gpt-4o"))
		first <- err
	}()
	// Once the caller has read the 429, the lane is held until the
	// Retry-After passes.
	waitUntil(t, func() bool { return statsOf(t, c, "gpt-4o", "a/*").Paced })
	tg := c.routes["gpt-4o"].flat[0].t
	l := tg.laneFor(laneKey(chat("gpt-4o").Header, tg.up.cfg))
	until := l.HeldUntil()
	if _, err := c.Do(t.Context(), chat("gpt-4o")); err != nil {
		t.Fatalf("second request: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("refused request: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) < 3 {
		t.Fatalf("%d upstream calls, want the refused one, its retry and the second request", len(at))
	}
	for i, a := range at[1:] {
		if a.Before(until) {
			t.Errorf("call %d sent %s before the hold of the 429's Retry-After: 1 ended", i+2, until.Sub(a))
		}
	}
}

// A refused attempt's slot is not handed to a request queued behind it
// before its Retry-After holds the lane: released first, the slot would send
// that request into the model that has just refused.
func TestRetryAfterHoldsBeforeTheSlotIsPassedOn(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var at []time.Time
	var refused time.Time
	answer := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		if calls.Add(1) == 1 {
			<-answer
			mu.Lock()
			refused = time.Now()
			mu.Unlock()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	opts := oneTarget(srv.URL + "/v1")
	opts.Upstreams[0].MaxConcurrency = 1 // one slot: the second request queues
	c := newCaller(t, opts)
	errs := make(chan error, 2)
	do := func() {
		_, err := c.Do(context.Background(), chat("gpt-4o"))
		errs <- err
	}
	go do()
	waitUntil(t, func() bool { return calls.Load() == 1 })
	go do()
	waitUntil(t, func() bool { return statsOf(t, c, "gpt-4o", "a/*").Queued == 1 })
	close(answer)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("request: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, a := range at[1:] {
		if a.Before(refused.Add(time.Second)) {
			t.Errorf("call %d sent %s after the 429 with Retry-After: 1, want at least 1s", i+2, a.Sub(refused).Round(time.Millisecond))
		}
	}
}
