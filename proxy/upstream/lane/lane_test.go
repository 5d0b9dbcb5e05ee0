package lane

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTarget is a lane's target that keeps the counts the tests read.
type fakeTarget struct {
	queued                                       atomic.Int64
	retries, budgetWaits, loneRetries, abandoned atomic.Uint64
}

func (f *fakeTarget) Name() string            { return "a/*" }
func (f *fakeTarget) LimitMoved(float64)      {}
func (f *fakeTarget) PaceMoved(float64)       {}
func (f *fakeTarget) Queued(d int64)          { f.queued.Add(d) }
func (f *fakeTarget) QueueWait(time.Duration) {}
func (f *fakeTarget) RetrySent()              { f.retries.Add(1) }
func (f *fakeTarget) BudgetWaited()           { f.budgetWaits.Add(1) }
func (f *fakeTarget) LoneRetry()              { f.loneRetries.Add(1) }
func (f *fakeTarget) Abandoned()              { f.abandoned.Add(1) }
func (f *fakeTarget) Rand() float64           { return 0.5 } // a fixed phase after a hold: the tests time sends

// stats is the counts of l's target.
func stats(l *Lane) *fakeTarget { return l.t.(*fakeTarget) }

func testLane(t *testing.T, limit float64) *Lane {
	t.Helper()
	l := New(&fakeTarget{}, "", DefaultMaxConcurrency, DefaultMaxQueue)
	l.lim.limit = limit
	l.lim.cut, l.lim.refusedAt = true, limit // past its cold start: limit is what it learnt
	l.tokens = float64(l.lim.slots())        // a bucket filled at that limit
	// A crowd: more requests on the lane than a lone one holds (the
	// caller counts them; these tests drive the lane directly). The lone
	// lane's tests set present themselves.
	l.present = loneMax + 1
	return l
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitGranted waits up to 10 s for an acquire started by acquireAsync, failing
// with why when it does not come.
func waitGranted(t *testing.T, done chan error, why string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestLaneQueuesInClassOrder: with the one slot taken, waiters are served
// retries first, then realtime, then default, then batch, each first come
// first served.
func TestLaneQueuesInClassOrder(t *testing.T) {
	l := testLane(t, 1)
	deadline := time.Now().Add(time.Minute)
	if err := l.Acquire(t.Context(), ClassRank("", false), false, true, deadline); err != nil {
		t.Fatal(err)
	}
	arrivals := []struct {
		name  string
		class string
		retry bool
	}{{"batch-1", "batch", false}, {"default-1", "", false}, {"realtime-1", "realtime", false},
		{"default-2", "", false}, {"retry-1", "", true}, {"batch-2", "batch", false}}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, a := range arrivals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Acquire(context.Background(), ClassRank(a.class, a.retry), a.retry, true, deadline); err != nil {
				t.Errorf("%s: %v", a.name, err)
				return
			}
			mu.Lock()
			order = append(order, a.name)
			mu.Unlock()
			l.Release()
		}()
		waitUntil(t, func() bool { return stats(l).queued.Load() == int64(i+1) })
	}
	l.Release()
	wg.Wait()
	want := []string{"retry-1", "realtime-1", "default-1", "default-2", "batch-1", "batch-2"}
	if len(order) != len(want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order = %v, want %v", order, want)
		}
	}
}

// TestLaneShedsWhenTheWaitWouldNotFit: the expected wait (queue ahead ÷
// measured rate) beyond the time left gets 429 at once, with that wait as
// Retry-After; a waiter that can no longer get an answer in time leaves with
// a 429 too, never a timeout.
func TestLaneShedsWhenTheWaitWouldNotFit(t *testing.T) {
	l := testLane(t, 1)
	l.lim.serviceE = 1 // 1 s per answer: 1 answer/s with one slot
	if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Three waiters with plenty of time.
	for i := range 3 {
		go l.Acquire(context.Background(), 2, false, true, time.Now().Add(time.Minute))
		waitUntil(t, func() bool { return stats(l).queued.Load() == int64(i+1) })
	}
	start := time.Now()
	err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(2*time.Second))
	var shed *Shed
	if !errors.As(err, &shed) || shed.Reason != ShedWaitBeyond || !errors.Is(err, ErrShed) {
		t.Fatalf("acquire = %v, want a wait_beyond_deadline shed", err)
	}
	// A shed decided up front returns long before the 2 s deadline; one
	// that waited in the queue would take the whole 2 s (and carry
	// queue_timeout, caught above). 1.5 s leaves room for a busy CI core.
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("shed after %s, want at once (well before the 2s deadline)", d)
	}
	if shed.RetryAfter < 4*time.Second || shed.RetryAfter > 5*time.Second {
		t.Errorf("retry after = %s, want the expected wait of 4 answers at 1/s", shed.RetryAfter)
	}

	// A realtime request waits only behind realtime ones: it fits.
	l.lim.serviceE = 0.05
	done := make(chan error, 1)
	go func() { done <- l.Acquire(context.Background(), 1, false, true, time.Now().Add(300*time.Millisecond)) }()
	// Nobody releases: it must leave the queue before its deadline with a shed.
	select {
	case err := <-done:
		if !errors.As(err, &shed) || shed.Reason != ShedQueueTimeout {
			t.Errorf("queued acquire = %v, want a queue_timeout shed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter stayed queued past its deadline")
	}
}

// TestClockedLaneSendsIntoItsOwnAnswers: a refusal for want of room that
// comes back in a minute, while the lane has other attempts at the model,
// keeps a free slot unused (nothing is sent into a model that just said it
// is full) until one of the lane's own answers comes, and then sends at
// once, without waiting out the minute; with no other attempt in flight the
// same refusal holds the lane outright.
func TestClockedLaneSendsIntoItsOwnAnswers(t *testing.T) {
	l := testLane(t, 3)
	for range 3 {
		if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	sent := time.Now()
	l.Clock(sent.Add(time.Minute)) // the third attempt was refused: the model is full
	l.Release()                    // its slot, without a verdict: one slot is free
	done := acquireAsync(l, false)
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	l.mu.Lock()
	l.dispatch(time.Now()) // what a wake or an arrival does
	inflight := l.inflight
	l.mu.Unlock()
	if inflight != 2 || l.Wait(time.Now()) != 0 {
		t.Fatalf("in flight %d, hold %s after the refusal; want 2 (the free slot unused) and no hold of the lane", inflight, l.Wait(time.Now()))
	}
	l.Done(sent, 10*time.Millisecond, Answered) // one of its own answers frees a slot
	waitGranted(t, done, "the queued request was not sent into the slot the lane's own answer freed")

	alone := testLane(t, 3)
	if err := alone.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	alone.Clock(time.Now().Add(time.Minute))
	if w := alone.Wait(time.Now()); w < 50*time.Second {
		t.Errorf("a refusal of the lane's only attempt holds it %s, want the minute", w)
	}
}

// TestClockedLaneSendsIntoItsOwnAnswerWhenPaced: a clocked lane whose own
// answer frees a slot while its send bucket is empty sends the next request
// into that slot once its pacing gives a token, not at the end of the
// Retry-After (a minute here).
func TestClockedLaneSendsIntoItsOwnAnswerWhenPaced(t *testing.T) {
	l := testLane(t, 2)
	l.lim.serviceE = 1 // a token a second at one slot: the bucket is empty at the answer
	for range 2 {
		if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	sent := time.Now()
	l.Clock(sent.Add(time.Minute)) // the second attempt was refused: the model is full
	l.Done(sent, 0, Congested)     // its slot: the limit is cut, the lane clocked
	done := acquireAsync(l, false)
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	l.mu.Lock()
	l.tokens = 0
	l.mu.Unlock()
	answered := time.Now()
	l.Done(sent, 10*time.Millisecond, Answered) // its own answer frees a slot
	waitGranted(t, done, "the queued request waited for the end of the Retry-After, not for the pacing token")
	l.mu.Lock()
	pace := l.lim.pace()
	l.mu.Unlock()
	if d, gap := time.Since(answered), time.Duration(float64(time.Second)/pace); d < gap*9/10 {
		t.Errorf("sent %s after the answer, want a pacing gap (%s) at least: the lane was cut", d, gap)
	}
}

// TestLaneLearnsItsClientsPatience: a queued request whose client goes away
// teaches the lane how long its clients wait; its urgency then counts that
// wait, not the request's deadline, until crowdMemory has passed without
// another.
func TestLaneLearnsItsClientsPatience(t *testing.T) {
	l := testLane(t, 1)
	l.lim.serviceE = 0.5 // 2 answers a second at one slot
	l.lifoAfter = time.Hour
	if err := l.Acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- l.Acquire(ctx, 2, false, true, time.Now().Add(time.Minute)) }()
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire after its client went away: %v, want context.Canceled", err)
	}
	l.mu.Lock()
	learnt := l.patience > 0 && !l.leftAt.IsZero()
	l.patience = 3 // as if the clients left after 3 s
	l.mu.Unlock()
	if !learnt {
		t.Fatal("a client that went away from the queue taught the lane nothing")
	}
	for i := range 3 {
		go l.Acquire(context.Background(), 2, false, true, time.Now().Add(time.Minute))
		waitUntil(t, func() bool { return stats(l).queued.Load() == int64(i+1) })
	}
	l.mu.Lock()
	now := time.Now()
	impatient := l.urgency(now)
	l.leftAt = now.Add(-crowdMemory - time.Second)
	patient := l.urgency(now)
	l.mu.Unlock()
	// 3 waiting at 2 a second: 1.5 s of sends, over at most 3 s left.
	if impatient < 0.5 {
		t.Errorf("urgency with clients that wait 3 s = %v, want ≥ 0.5", impatient)
	}
	if want := 1.5 / 60; patient > 2*want {
		t.Errorf("urgency once the last client left long ago = %v, want about %v (the minute's deadline)", patient, want)
	}
}
