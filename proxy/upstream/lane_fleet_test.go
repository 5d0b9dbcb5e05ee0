package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// acquireAsync starts an acquire and returns its result channel.
func acquireAsync(l *lane, retry bool) chan error {
	done := make(chan error, 1)
	go func() { done <- l.acquire(context.Background(), 2, retry, true, time.Now().Add(time.Minute)) }()
	return done
}

// TestLaneBelowOneSlotPaces: a limit of a quarter slot at 100 ms per answer
// sends one request per 400 ms, not one whenever the slot is free.
func TestLaneBelowOneSlotPaces(t *testing.T) {
	l := testLane(t, 0.25)
	l.lim.serviceE = 0.1
	if err := l.acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	l.release() // the slot is free again at once
	done := acquireAsync(l, false)
	waitUntil(t, func() bool { return l.t.stats.queued.Load() == 1 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The second send waited for the bucket: 1 ÷ (0.25 ÷ 0.1 s) = 400 ms
	// after the first (a lower bound: a busy machine only makes it later).
	if d := time.Since(first); d < 350*time.Millisecond {
		t.Errorf("second send %s after the first, want about 400 ms (paced below one slot)", d)
	}
	if got := l.snapshot(time.Now()).pace; !near(got, 2.5) {
		t.Errorf("pace in stats = %v, want 2.5 sends/s", got)
	}
	l.release()
}

// TestLaneRetryBudget: retries spend the budget; a retry that finds it
// spent waits for a token (each first attempt adds a tenth) even though a
// slot is free, and is never sent before.
func TestLaneRetryBudget(t *testing.T) {
	l := testLane(t, 4)
	deadline := time.Now().Add(time.Minute)
	for range retryBudgetStart / retryCost { // the starting tokens
		if err := l.acquire(t.Context(), 0, true, true, deadline); err != nil {
			t.Fatal(err)
		}
		l.release()
	}
	done := acquireAsync(l, true)
	waitUntil(t, func() bool { return l.t.stats.queued.Load() == 1 })
	for i := range 9 {
		if err := l.acquire(t.Context(), 2, false, true, deadline); err != nil {
			t.Fatal(err)
		}
		l.release()
		select {
		case err := <-done:
			t.Fatalf("retry admitted (%v) after %d first attempts, want it to wait for 10", err, i+1)
		default:
		}
	}
	if err := l.acquire(t.Context(), 2, false, true, deadline); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("retry after 10 first attempts: %v", err)
	}
	if got, waits := l.t.stats.retries.Load(), l.t.stats.budgetWaits.Load(); got != retryBudgetStart/retryCost+1 || waits != 1 {
		t.Errorf("retries = %d, budget waits = %d; want %d and 1", got, waits, retryBudgetStart/retryCost+1)
	}
	// A retry with no token and no time for one to come is shed with a
	// Retry-After, never sent.
	err := l.acquire(t.Context(), 0, true, true, time.Now().Add(50*time.Millisecond))
	var shed *laneShed
	if !errors.As(err, &shed) {
		t.Errorf("retry over budget near its deadline = %v, want a shed", err)
	}
	// One that may fall back to another target is shed at once, not queued.
	err = l.acquire(t.Context(), 0, true, false, deadline)
	if !errors.As(err, &shed) || shed.reason != ShedRetryBudget || l.t.lanes.sheds[len(shedReasons)-1].Load() != 0 {
		t.Errorf("retry over budget with a fallback = %v, want a retry_budget shed (not yet counted: the caller counts it)", err)
	}
}

// TestLaneServesNewestFirstUnderSustainedQueueing: once the queue has been
// non-empty for lifoAfter, the newest waiter of the best rank goes first;
// before that, first in first out.
func TestLaneServesNewestFirstUnderSustainedQueueing(t *testing.T) {
	for _, tt := range []struct {
		name      string
		lifoAfter time.Duration
		want      []int
	}{{"sustained", 0, []int{2, 1, 0}}, {"brief", time.Hour, []int{0, 1, 2}}} {
		t.Run(tt.name, func(t *testing.T) {
			l := testLane(t, 1)
			l.lifoAfter = tt.lifoAfter
			if err := l.acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := l.acquire(context.Background(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					l.release()
				}()
				waitUntil(t, func() bool { return l.t.stats.queued.Load() == int64(i+1) })
			}
			l.release()
			wg.Wait()
			for i := range tt.want {
				if len(order) != len(tt.want) || order[i] != tt.want[i] {
					t.Fatalf("order = %v, want %v", order, tt.want)
				}
			}
		})
	}
}

// TestLaneAbandonedAttemptHoldsItsSlot: an attempt whose client went away
// keeps its slot until the model would have answered it.
func TestLaneAbandonedAttemptHoldsItsSlot(t *testing.T) {
	l := testLane(t, 1)
	l.lim.serviceE = 0.3
	l.lifoAfter = time.Hour
	if err := l.acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	l.abandon(sent)
	done := acquireAsync(l, false)
	waitUntil(t, func() bool { return l.t.stats.queued.Load() == 1 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(sent); d < 250*time.Millisecond {
		t.Errorf("the slot of an abandoned attempt came back after %s, want its service time (300 ms)", d)
	}
	if got := l.t.stats.abandoned.Load(); got != 1 {
		t.Errorf("abandoned = %d, want 1", got)
	}
	l.release()
}

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
	l.pace.mu.Lock()
	until := l.pace.until
	l.pace.mu.Unlock()
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

// TestLaneUrgency: the time to send every waiting request at the lane's rate,
// over the time the newest one has left.
func TestLaneUrgency(t *testing.T) {
	l := testLane(t, 1)
	l.lim.serviceE = 0.5 // 2 answers a second at one slot
	l.lifoAfter = time.Hour
	now := time.Now()
	if got := l.urgency(now); got != 0 {
		t.Errorf("urgency of an empty queue = %v, want 0", got)
	}
	if err := l.acquire(t.Context(), 2, false, true, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	deadline := now.Add(10 * time.Second)
	for i := range 3 {
		go l.acquire(context.Background(), 2, false, true, deadline)
		waitUntil(t, func() bool { return l.t.stats.queued.Load() == int64(i+1) })
	}
	l.mu.Lock()
	at := time.Now()
	got, want := l.urgency(at), 3/2.0/deadline.Sub(at).Seconds()
	l.mu.Unlock()
	if got < want*0.99 || got > want*1.01 {
		t.Errorf("urgency = %v, want 3 waiting ÷ 2/s ÷ time left = %v", got, want)
	}
}

// TestLaneHoldEndsAtARandomPhase: when a Retry-After hold ends, a lane that
// shares the model sends one to two pacing gaps later (here 1.5, the phase
// fixed by testLane), not at once; a lane that does not share it (a lone
// sidecar) sends what its bucket holds at once, refilling the model.
func TestLaneHoldEndsAtARandomPhase(t *testing.T) {
	hold := 100 * time.Millisecond
	refuse := func(l *lane) time.Time {
		if err := l.acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		l.pace.hold(sent.Add(hold)) // as holdLane does before done
		l.done(sent, time.Millisecond, congested)
		return sent
	}
	t.Run("shared", func(t *testing.T) {
		l := testLane(t, 0.5)
		l.lim.serviceE = 0.1
		refused := refuse(l) // limit 0.25: 2.5 sends a second
		if err := <-acquireAsync(l, false); err != nil {
			t.Fatal(err)
		}
		// hold + 1.5 gaps of 400 ms = 700 ms; without the restart the
		// bucket's 0.25 token earned in the hold makes it 400 ms.
		if d := time.Since(refused); d < 650*time.Millisecond {
			t.Errorf("sent %s after the refusal, want at least the hold and 1.5 pacing gaps (700 ms)", d)
		}
		l.release()
	})
	t.Run("alone", func(t *testing.T) {
		l := testLane(t, 4)
		l.lim.serviceE = 1
		l.lim.refusedAt = 8 // refused at eight: not shared
		l.lifoAfter = time.Hour
		l.tokens = 4         // a full bucket
		refused := refuse(l) // limit 2: 2 sends a second, two slots
		first, second := acquireAsync(l, false), acquireAsync(l, false)
		for _, done := range []chan error{first, second} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		d := time.Since(refused)
		if d < hold {
			t.Errorf("both sent %s after the refusal, want after the %s hold", d, hold)
		}
		if d > hold+250*time.Millisecond {
			t.Errorf("both sent %s after the refusal, want both at the end of the %s hold (a pacing gap is 500 ms)", d, hold)
		}
	})
}
