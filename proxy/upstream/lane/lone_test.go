package lane

import (
	"testing"
	"time"
)

// refusedTwice sets l as a lane is after a model refused a request twice:
// cut to the floor of a shared lane, its bucket restarted at a random phase
// after the hold (one to two pacing gaps late: 2.4 to 4.8 s at this limit
// and 0.3 s per answer), the hold running for another hold.
func refusedTwice(l *Lane, hold time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lim.limit, l.lim.refusedAt, l.lim.serviceE = 0.125, 0.5, 0.3
	l.tokens, l.tokensAt = -0.5, now.Add(hold)
	l.pace.hold(now.Add(hold))
}

// TestLoneLaneRetriesWhenTheHoldEnds: in a lane holding a few requests,
// the retry of a refusal goes when it comes (the caller has waited its own
// refusal's Retry-After), though a later refusal of another of the lane's
// requests holds the lane, its pace would make it wait seconds more and its
// retry budget is spent; in a crowd the same lane keeps it waiting until
// the hold ends, and then for its budget and pace.
func TestLoneLaneRetriesWhenTheHoldEnds(t *testing.T) {
	for _, tt := range []struct {
		name    string
		present int
		crowdAt time.Duration // ago; 0: never a crowd
		sent    bool
	}{
		{"alone", 1, 0, true},
		{"nearly alone", loneMax, 0, true},
		{"alone long after a crowd", 1, crowdMemory + time.Second, true},
		{"crowd", loneMax + 1, 0, false},
		{"the last of a crowd", 1, time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := testLane(t, 1)
			l.present = tt.present
			if tt.crowdAt > 0 {
				l.crowdAt = time.Now().Add(-tt.crowdAt)
			}
			l.budget = 0
			hold := 50 * time.Millisecond
			if tt.sent {
				hold = time.Minute // another request's refusal holds the lane
			}
			refusedTwice(l, hold)
			done := acquireAsync(l, true)
			if !tt.sent {
				waitUntil(t, func() bool { return stats(l).queued.Load() == 1 }) // held
				waitUntil(t, func() bool { return l.pace.wait(time.Now()) == 0 })
				// What the wake timer does when the hold ends.
				l.mu.Lock()
				l.dispatch(time.Now())
				inflight := l.inflight
				l.mu.Unlock()
				if inflight != 0 || stats(l).queued.Load() != 1 {
					t.Errorf("in flight %d, queued %d after the hold; want the crowd's retry waiting for its budget and pace", inflight, stats(l).queued.Load())
				}
				return
			}
			waitGranted(t, done, "the lone retry waited for the hold another refusal set")
			if ts := stats(l); ts.loneRetries.Load() != 1 || ts.retries.Load() != 0 || l.budget != 0 {
				t.Errorf("lone retries %d, budgeted retries %d, budget %d; want 1, 0, 0 (a lone retry spends no budget)",
					ts.loneRetries.Load(), ts.retries.Load(), l.budget)
			}
		})
	}
}

// TestLoneLaneSendsItsFewTogether: the retries of four prompts refused at
// once go at once, though the lane's limit (a quarter slot, its bucket
// empty) lets one through now and then; a fifth request on the lane makes
// it a crowd again, paced one by one.
func TestLoneLaneSendsItsFewTogether(t *testing.T) {
	l := testLane(t, 0.25)
	l.lim.serviceE = 0.3
	l.tokens = 0
	l.present = loneMax
	deadline := time.Now().Add(time.Minute)
	for i := range loneMax {
		if err := l.Acquire(t.Context(), 0, true, true, deadline); err != nil {
			t.Fatalf("retry %d: %v", i+1, err)
		}
	}
	if l.inflight != loneMax {
		t.Fatalf("in flight %d, want the %d retries", l.inflight, loneMax)
	}
	l.present++
	done := acquireAsync(l, true)
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	select {
	case err := <-done:
		t.Fatalf("a crowd's retry went beyond the limit: %v", err)
	default:
	}
	for range loneMax {
		l.Release()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestLoneLaneSendsWhatItHeldAtTheRefusal: requests that came onto the
// lane together (a burst) go together when the hold ends, as its retries
// do; one that arrives apart from them is new demand, and it waits for the
// lane's pace.
func TestLoneLaneSendsWhatItHeldAtTheRefusal(t *testing.T) {
	l := testLane(t, 1)
	l.present = loneMax
	deadline := time.Now().Add(time.Minute)
	if err := l.Acquire(t.Context(), 2, false, true, deadline); err != nil { // the refused attempt's slot
		t.Fatal(err)
	}
	refusedTwice(l, 20*time.Millisecond) // the model refused: held, cut, bucket empty
	l.mu.Lock()
	l.arrived, l.firstArrived = time.Now(), time.Now() // a burst
	l.mu.Unlock()
	early := []chan error{acquireAsync(l, false), acquireAsync(l, false)}
	waitUntil(t, func() bool { return stats(l).queued.Load() == 2 })
	l.Release()
	waitUntil(t, func() bool { return l.pace.wait(time.Now()) == 0 })
	l.mu.Lock()
	l.dispatch(time.Now()) // what the wake timer does when the hold ends
	l.mu.Unlock()
	for i, done := range early {
		if err := <-done; err != nil {
			t.Fatalf("request %d of the burst: %v", i+1, err)
		}
	}
	// Then one arrives apart from the others: new demand.
	waitUntil(t, func() bool { return time.Since(l.firstArrived) > burstWindow })
	l.mu.Lock()
	l.arrived = time.Now()
	l.mu.Unlock()
	late := acquireAsync(l, false)
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	l.mu.Lock()
	l.dispatch(time.Now())
	l.mu.Unlock()
	select {
	case err := <-late:
		t.Fatalf("a request that came apart from the burst went unpaced (%v)", err)
	default:
	}
	if stats(l).queued.Load() != 1 {
		t.Errorf("queued %d, want the late request waiting for its pace", stats(l).queued.Load())
	}
}

// TestRetryWaitingForBudgetGoesWhenTheLaneTurnsLone: a retry queued for a
// spent retry budget, in a lane whose crowd has gone, is sent when the
// crowd's memory runs out, though no first attempt comes to refill the
// budget or to dispatch (a burst's last retries sat to their deadline).
func TestRetryWaitingForBudgetGoesWhenTheLaneTurnsLone(t *testing.T) {
	l := testLane(t, 1)
	l.present = 1
	l.crowdAt = time.Now().Add(-crowdMemory + 100*time.Millisecond)
	l.budget = 0
	done := acquireAsync(l, true)
	waitGranted(t, done, "the retry still waits for a budget after the lane turned lone")
}

// TestLoneLaneBurstWaitsOneHold: a request that came with a lone lane's
// refused ones waits out the hold it met, not the longer one a later
// refusal of the lane's retries sets.
func TestLoneLaneBurstWaitsOneHold(t *testing.T) {
	l := testLane(t, 1)
	now := time.Now()
	l.mu.Lock()
	l.present, l.arrived, l.firstArrived = 2, now, now // two prompts at once: a lone lane's burst
	l.pace.hold(now.Add(100 * time.Millisecond))
	l.mu.Unlock()
	done := acquireAsync(l, false)
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	l.mu.Lock()
	l.pace.hold(time.Now().Add(time.Minute)) // a retry refused again
	l.mu.Unlock()
	waitGranted(t, done, "the burst's request waited for the hold a later refusal set")
	if d := time.Since(now); d < 90*time.Millisecond {
		t.Errorf("sent %s after the first hold began, before its 100 ms ended", d)
	}
}
