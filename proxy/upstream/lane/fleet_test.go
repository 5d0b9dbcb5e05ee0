package lane

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// acquireAsync starts an acquire and returns its result channel.
func acquireAsync(l *Lane, retry bool) chan error {
	done := make(chan error, 1)
	go func() { done <- l.Acquire(context.Background(), 2, retry, true, time.Now().Add(time.Minute)) }()
	return done
}

// TestLaneBelowOneSlotPaces: a limit of a quarter slot at 100 ms per answer
// sends one request per 400 ms, not one whenever the slot is free.
func TestLaneBelowOneSlotPaces(t *testing.T) {
	l := testLane(t, 0.25)
	l.lim.serviceE = 0.1
	if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	l.Release() // the slot is free again at once
	done := acquireAsync(l, false)
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The second send waited for the bucket: 1 ÷ (0.25 ÷ 0.1 s) = 400 ms
	// after the first (a lower bound: a busy machine only makes it later).
	if d := time.Since(first); d < 350*time.Millisecond {
		t.Errorf("second send %s after the first, want about 400 ms (paced below one slot)", d)
	}
	if got := l.Snapshot(time.Now()).Pace; !near(got, 2.5) {
		t.Errorf("pace in stats = %v, want 2.5 sends/s", got)
	}
	l.Release()
}

// TestLaneSendsInChains: a lane that shares the model below one slot, with
// three requests queued, waits until its bucket holds three tokens, sends
// one, and sends the next the moment that one's answer frees the slot. A
// lane below one slot that does not share the model (refused at 1.5) saves
// no more than one token.
func TestLaneSendsInChains(t *testing.T) {
	l := testLane(t, 0.5)
	l.lim.serviceE = 0.1 // 5 sends a second: a gap of 200 ms
	l.lifoAfter = time.Hour
	l.mu.Lock()
	l.tokens, l.tokensAt = 0, time.Now()
	start := l.tokensAt
	l.mu.Unlock()
	var granted []chan error
	for i := range chainLen {
		granted = append(granted, acquireAsync(l, false))
		waitUntil(t, func() bool { return stats(l).queued.Load() == int64(i+1) })
	}
	if err := <-granted[0]; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Duration(chainLen)*180*time.Millisecond {
		t.Errorf("first of a chain sent %s after the bucket emptied, want after %d gaps of 200 ms", d, chainLen)
	}
	for i := 1; i < chainLen; i++ {
		l.Done(time.Now(), time.Millisecond, Answered)
		l.mu.Lock()
		inflight := l.inflight // granted within done, or not at all
		l.mu.Unlock()
		if inflight != 1 {
			t.Fatalf("after answer %d of the chain: %d in flight, want the next sent at once", i, inflight)
		}
		if err := <-granted[i]; err != nil {
			t.Fatal(err)
		}
	}
	l.Release()

	alone := testLane(t, 0.5)
	alone.lim.refusedAt = 1.5
	alone.lim.serviceE = 0.1
	alone.mu.Lock()
	alone.tokens, alone.tokensAt = 0, time.Now()
	alone.fill(alone.tokensAt.Add(time.Hour), alone.lim.pace())
	tokens := alone.tokens
	alone.mu.Unlock()
	if tokens != 1 {
		t.Errorf("a lane below one slot that does not share the model saved %v tokens in an hour, want 1", tokens)
	}
}

// TestLaneChainsWhenBehind: a lane that shares the model and has time to
// spare waits for three tokens before a chain, and a refusal of the chain's
// first send costs it the tokens it saved; a lane behind its deadlines sends
// on one token and keeps what it saved.
func TestLaneChainsWhenBehind(t *testing.T) {
	for _, tt := range []struct {
		name    string
		left    time.Duration // of the waiters' deadlines
		granted bool          // on one token, three waiting
		kept    float64       // tokens after a refusal, of two saved (phase 0.5)
	}{{"time to spare", time.Minute, false, -0.5}, {"behind", 2 * time.Second, true, 1.5}} {
		t.Run(tt.name, func(t *testing.T) {
			l := testLane(t, 0.5)
			l.lim.serviceE = 0.5 // one send a second
			l.lifoAfter = time.Hour
			now := time.Now()
			l.mu.Lock()
			defer l.mu.Unlock()
			for range chainLen {
				l.insert(&waiter{rank: 2, queued: now, deadline: now.Add(tt.left), ready: make(chan struct{})}, now)
			}
			if u := l.urgency(now); (u > 1) != tt.granted {
				t.Fatalf("urgency %v, want behind = %v", u, tt.granted)
			}
			l.tokens, l.tokensAt = 1, now
			l.dispatch(now)
			if got := l.inflight == 1; got != tt.granted {
				t.Errorf("on one token with %d waiting: sent = %v, want %v", chainLen, got, tt.granted)
			}
			l.tokens, l.tokensAt = 2, now
			l.restartBucket(now.Add(time.Second))
			if !near(l.tokens, tt.kept) {
				t.Errorf("tokens after a hold = %v, want %v", l.tokens, tt.kept)
			}
			l.restartBucket(now.Add(time.Second)) // a dispatch during the same hold
			if !near(l.tokens, tt.kept) {
				t.Errorf("tokens after a second restart for the same hold = %v, want %v (one phase per hold)", l.tokens, tt.kept)
			}
			l.waiters.Init()
		})
	}
}

// TestLaneRetryBudget: retries spend the budget; a retry that finds it
// spent waits for a token (each first attempt adds a tenth) even though a
// slot is free, and is never sent before.
func TestLaneRetryBudget(t *testing.T) {
	l := testLane(t, 4)
	deadline := time.Now().Add(time.Minute)
	for range retryBudgetStart / retryCost { // the starting tokens
		if err := l.Acquire(t.Context(), 0, true, true, deadline); err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	done := acquireAsync(l, true)
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	for i := range 9 {
		if err := l.Acquire(t.Context(), 2, false, true, deadline); err != nil {
			t.Fatal(err)
		}
		l.Release()
		select {
		case err := <-done:
			t.Fatalf("retry admitted (%v) after %d first attempts, want it to wait for 10", err, i+1)
		default:
		}
	}
	if err := l.Acquire(t.Context(), 2, false, true, deadline); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("retry after 10 first attempts: %v", err)
	}
	if got, waits := stats(l).retries.Load(), stats(l).budgetWaits.Load(); got != retryBudgetStart/retryCost+1 || waits != 1 {
		t.Errorf("retries = %d, budget waits = %d; want %d and 1", got, waits, retryBudgetStart/retryCost+1)
	}
	// A retry with no token and no time for one to come is shed with a
	// Retry-After, never sent.
	err := l.Acquire(t.Context(), 0, true, true, time.Now().Add(50*time.Millisecond))
	var shed *Shed
	if !errors.As(err, &shed) {
		t.Errorf("retry over budget near its deadline = %v, want a shed", err)
	}
	// One that may fall back to another target is shed at once, not queued.
	err = l.Acquire(t.Context(), 0, true, false, deadline)
	if !errors.As(err, &shed) || shed.Reason != ShedRetryBudget {
		t.Errorf("retry over budget with a fallback = %v, want a retry_budget shed", err)
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
			if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := l.Acquire(context.Background(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					l.Release()
				}()
				waitUntil(t, func() bool { return stats(l).queued.Load() == int64(i+1) })
			}
			l.Release()
			wg.Wait()
			for i := range tt.want {
				if len(order) != len(tt.want) || order[i] != tt.want[i] {
					t.Fatalf("order = %v, want %v", order, tt.want)
				}
			}
		})
	}
}

// TestLaneServesTheOldestOnceItWaitedHalfItsTime: under sustained queueing
// the newest goes first, until the oldest has waited as long as it has left
// before its deadline; then the oldest goes first.
func TestLaneServesTheOldestOnceItWaitedHalfItsTime(t *testing.T) {
	l := testLane(t, 1)
	l.lifoAfter = 0
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	add := func(waited, left time.Duration) *waiter {
		w := &waiter{rank: 2, queued: now.Add(-waited), deadline: now.Add(left), ready: make(chan struct{})}
		l.insert(w, w.queued)
		return w
	}
	oldest := add(25*time.Second, 35*time.Second)
	add(10*time.Second, 50*time.Second)
	newest := add(0, time.Minute)
	if got := l.next(now).Value.(*waiter); got != newest {
		t.Errorf("picked the one queued %s ago, want the newest (LIFO)", now.Sub(got.queued))
	}
	later := now.Add(5 * time.Second) // the oldest has waited 30 s, 30 s left
	if got := l.next(later).Value.(*waiter); got != oldest {
		t.Errorf("picked the one queued %s ago, want the oldest: it waited as long as it has left", later.Sub(got.queued))
	}
}

// TestLaneAbandonedAttemptHoldsItsSlot: an attempt whose client went away
// keeps its slot until the model would have answered it.
func TestLaneAbandonedAttemptHoldsItsSlot(t *testing.T) {
	l := testLane(t, 1)
	l.lim.serviceE = 0.3
	l.lifoAfter = time.Hour
	if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	l.Abandon(sent)
	done := acquireAsync(l, false)
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(sent); d < 250*time.Millisecond {
		t.Errorf("the slot of an abandoned attempt came back after %s, want its service time (300 ms)", d)
	}
	if got := stats(l).abandoned.Load(); got != 1 {
		t.Errorf("abandoned = %d, want 1", got)
	}
	l.Release()
}

// TestLaneUrgency: the time to send every waiting request at the lane's pace,
// over the time the newest one has left.
func TestLaneUrgency(t *testing.T) {
	l := testLane(t, 1)
	l.lim.serviceE = 0.5 // 2 answers a second at one slot
	l.lifoAfter = time.Hour
	now := time.Now()
	if got := l.urgency(now); got != 0 {
		t.Errorf("urgency of an empty queue = %v, want 0", got)
	}
	if err := l.Acquire(t.Context(), 2, false, true, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	deadline := now.Add(10 * time.Second)
	for i := range 3 {
		go l.Acquire(context.Background(), 2, false, true, deadline)
		waitUntil(t, func() bool { return stats(l).queued.Load() == int64(i+1) })
	}
	l.mu.Lock()
	at := time.Now()
	got, want := l.urgency(at), 3/2.0/deadline.Sub(at).Seconds()
	l.mu.Unlock()
	if got < want*0.99 || got > want*1.01 {
		t.Errorf("urgency = %v, want 3 waiting ÷ 2/s ÷ time left = %v", got, want)
	}
	// Answers that came fast before a cut do not make the lane look ahead:
	// its pace, not its past rate, is what it will send at.
	l.mu.Lock()
	for i := range rateRing {
		l.lim.answered(500*time.Millisecond, 0, 0, at.Add(time.Duration(i-rateRing)*10*time.Millisecond))
	}
	fast := l.lim.rate(at)
	got = l.urgency(at)
	l.mu.Unlock()
	if fast < 10 || got < want*0.99 || got > want*1.01 {
		t.Errorf("after %d answers 10 ms apart (rate %.1f/s): urgency = %v, want %v at the pace of 2/s", rateRing, fast, got, want)
	}
}

// TestLaneHoldEndsAtARandomPhase: when a Retry-After hold ends, a lane that
// shares the model sends one to two pacing gaps later (here 1.5, the phase
// fixed by testLane), not at once; a lane that does not share it (a lone
// sidecar) sends what its bucket holds at once, refilling the model.
func TestLaneHoldEndsAtARandomPhase(t *testing.T) {
	hold := 100 * time.Millisecond
	refuse := func(l *Lane) time.Time {
		if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		l.pace.hold(sent.Add(hold)) // as holdLane does before done
		l.Done(sent, time.Millisecond, Congested)
		return sent
	}
	t.Run("shared", func(t *testing.T) {
		l := testLane(t, 0.5)
		l.lim.serviceE = 0.1
		refused := refuse(l) // nothing queued: limit 0.125, 1.25 sends a second
		if err := <-acquireAsync(l, false); err != nil {
			t.Fatal(err)
		}
		// hold + 1.5 gaps of 800 ms = 1.3 s; without the restart the
		// bucket's 0.125 token earned in the hold makes it 800 ms.
		if d := time.Since(refused); d < 1200*time.Millisecond {
			t.Errorf("sent %s after the refusal, want at least the hold and 1.5 pacing gaps (1.3 s)", d)
		}
		l.Release()
	})
	t.Run("alone", func(t *testing.T) {
		l := testLane(t, 4)
		l.lim.serviceE = 1
		l.lifoAfter = time.Hour
		// Two in flight, and a third refused: the model took two of this
		// lane's attempts (a count), so it is not shared.
		for range 2 {
			if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		l.tokens = 4         // a full bucket
		refused := refuse(l) // limit 1.5: 1.5 sends a second, two slots
		l.Release()
		l.Release()
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
			t.Errorf("both sent %s after the refusal, want both at the end of the %s hold (a pacing gap is 667 ms)", d, hold)
		}
	})
}
