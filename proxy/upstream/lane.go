package upstream

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Shed reasons: the label of breakwater_upstream_shed_total and the keys of
// TargetStats.Sheds.
const (
	ShedQueueFull    = "queue_full"           // the lane's or pool's queue was full
	ShedWaitBeyond   = "wait_beyond_deadline" // the expected queue wait exceeded the time left
	ShedQueueTimeout = "queue_timeout"        // still queued when the time left could no longer fit an answer
	ShedRateLimited  = "rate_limited"         // paced by the upstream's rate-limit state beyond the deadline
	ShedBreakerOpen  = "breaker_open"         // the breaker refused and no probe was free
)

// shedReasons lists every reason, for stats.
var shedReasons = [...]string{ShedQueueFull, ShedWaitBeyond, ShedQueueTimeout, ShedRateLimited, ShedBreakerOpen}

// laneShed is a request a lane refused before it reached the upstream.
type laneShed struct {
	target, reason    string
	retryAfter        time.Duration
	waiting, inflight int
	slots             int
	left              time.Duration
}

func (e *laneShed) Error() string {
	switch e.reason {
	case ShedQueueFull:
		return fmt.Sprintf("breakwater: the queue for %s is full (%d waiting for %d slots of its adaptive limit); retry after %s or raise max_queue",
			e.target, e.waiting, e.slots, atLeastSecond(e.retryAfter))
	case ShedQueueTimeout:
		return fmt.Sprintf("breakwater: %s is at capacity: the request waited in its queue until no answer could arrive within the deadline (%d waiting, %d slots); retry after %s",
			e.target, e.waiting, e.slots, atLeastSecond(e.retryAfter))
	}
	return fmt.Sprintf("breakwater: %s is at capacity: %d requests wait for %d slots, an expected wait of %s, beyond the %s left of the deadline; retry after %s",
		e.target, e.waiting, e.slots, e.retryAfter.Round(time.Millisecond), e.left.Round(time.Millisecond), atLeastSecond(e.retryAfter))
}

func (e *laneShed) Unwrap() error { return ErrShed }

// classRank orders a lane's queue: interactive classes first, batch classes
// last, everything else in between; within a rank, first come first served.
// Retries of a request the upstream refused go ahead of every class: they
// were admitted once already.
func classRank(class string, retry bool) int {
	switch {
	case retry:
		return 0
	case class == "realtime" || class == "interactive":
		return 1
	case class == "batch" || class == "background" || class == "bulk":
		return 3
	}
	return 2
}

// lane is the unit of admission: one target, and one forwarded key on that
// target when clients' keys are forwarded. It holds the adaptive limit, the
// class-ordered queue and the rate-limit pacing, so a key that the upstream
// limits never slows another key.
type lane struct {
	t   *target
	key string // hash of the forwarded key; "" when the sidecar holds the key
	// maxQueue bounds the queue.
	maxQueue int
	pace     pacer

	mu       sync.Mutex
	lim      aimd
	inflight int
	waiters  list.List // of *waiter, by (rank, arrival)
	waitE    float64   // EWMA of queue waits of granted requests, seconds
	used     time.Time // last acquire, for eviction
}

type waiter struct {
	rank  int
	ready chan struct{}
}

func newLane(t *target, key string, ceiling, maxQueue int) *lane {
	if maxQueue == 0 {
		maxQueue = DefaultMaxQueue
	}
	return &lane{t: t, key: key, maxQueue: max0(maxQueue), lim: newAIMD(ceiling)}
}

// expectedWait is how long a request of rank would wait for a slot now, and
// how many requests it would wait behind. The caller holds l.mu.
func (l *lane) expectedWait(rank int) (time.Duration, int) {
	ahead := 0
	for e := l.waiters.Front(); e != nil; e = e.Next() {
		if e.Value.(*waiter).rank <= rank {
			ahead++
		}
	}
	if ahead == 0 && l.inflight < l.lim.slots() {
		return 0, 0
	}
	r := l.lim.rate()
	if r <= 0 {
		return 0, ahead
	}
	return time.Duration(float64(ahead+1) / r * float64(time.Second)), ahead
}

// acquire takes a slot, waiting in class order when the limit is reached. It
// sheds at once (a *laneShed) when the queue is full or the expected wait
// plus an answer's time exceeds what is left before deadline, and sheds a
// waiter that is still queued when an answer could no longer fit. It returns
// ctx.Err() when ctx ends first.
func (l *lane) acquire(ctx context.Context, rank int, deadline time.Time) error {
	now := time.Now()
	left := deadline.Sub(now)
	l.mu.Lock()
	if l.used.IsZero() {
		defer l.t.limitMoved(l.lim.limit) // counted from first use
	}
	l.used = now
	wait, ahead := l.expectedWait(rank)
	service := l.lim.service()
	slots := l.lim.slots()
	var reason string
	retryAfter := wait
	switch {
	case service > left:
		// Not even an answer's time is left: an attempt would be cut by the
		// deadline, after costing the upstream the work.
		reason = ShedWaitBeyond
	case ahead == 0 && l.inflight < slots:
		l.inflight++
		l.mu.Unlock()
		return nil
	case l.waiters.Len() >= l.maxQueue:
		reason, retryAfter = ShedQueueFull, max(wait, shedRetryAfter)
	case wait+service > left:
		reason = ShedWaitBeyond
	}
	shed := &laneShed{target: l.t.name, reason: reason, retryAfter: retryAfter, waiting: l.waiters.Len(),
		inflight: l.inflight, slots: slots, left: left}
	if reason != "" {
		l.mu.Unlock()
		return shed
	}
	w := &waiter{rank: rank, ready: make(chan struct{})}
	e := l.insert(w)
	l.t.stats.queued.Add(1)
	l.mu.Unlock()
	defer l.t.stats.queued.Add(-1)

	// Leave the queue while an answer can still arrive before the deadline,
	// with room for one more answer's time, since service is an average.
	timer := time.NewTimer(max(left-2*service, 0))
	defer timer.Stop()
	select {
	case <-w.ready:
		if time.Until(deadline) > service {
			l.waited(time.Since(now))
			return nil
		}
		l.release() // granted too late for an answer to fit: pass the slot on
	case <-ctx.Done():
		l.leave(e, w)
	case <-timer.C:
		l.leave(e, w)
	}
	if err := ctx.Err(); errors.Is(err, context.Canceled) {
		return err
	}
	l.mu.Lock()
	wait, _ = l.expectedWait(rank)
	shed.waiting, shed.inflight, shed.slots = l.waiters.Len(), l.inflight, l.lim.slots()
	l.mu.Unlock()
	shed.reason, shed.retryAfter, shed.left = ShedQueueTimeout, wait, time.Until(deadline)
	return shed
}

// leave takes w out of the queue, passing its slot on if it was granted
// meanwhile.
func (l *lane) leave(e *list.Element, w *waiter) {
	l.mu.Lock()
	select {
	case <-w.ready:
		l.mu.Unlock()
		l.release()
	default:
		l.waiters.Remove(e)
		l.mu.Unlock()
	}
}

// insert queues w behind every waiter of the same or a lower rank. The caller
// holds l.mu.
func (l *lane) insert(w *waiter) *list.Element {
	for e := l.waiters.Back(); e != nil; e = e.Prev() {
		if e.Value.(*waiter).rank <= w.rank {
			return l.waiters.InsertAfter(w, e)
		}
	}
	return l.waiters.PushFront(w)
}

func (l *lane) waited(d time.Duration) {
	const alpha = 0.2
	l.mu.Lock()
	l.waitE += alpha * (d.Seconds() - l.waitE)
	l.mu.Unlock()
	l.t.c.metrics.queueWait(l.t.name, d)
}

// dispatch hands free slots to waiters in order. The caller holds l.mu.
func (l *lane) dispatch() {
	for l.inflight < l.lim.slots() {
		front := l.waiters.Front()
		if front == nil {
			return
		}
		l.waiters.Remove(front)
		l.inflight++
		close(front.Value.(*waiter).ready)
	}
}

// release returns a slot without a verdict.
func (l *lane) release() {
	l.mu.Lock()
	l.inflight--
	l.dispatch()
	l.mu.Unlock()
}

// done returns the slot of an attempt sent at sent and feeds its verdict to
// the adaptive limit.
func (l *lane) done(sent time.Time, d time.Duration, v verdict) {
	l.mu.Lock()
	before := l.lim.limit
	switch v {
	case success:
		l.lim.answered(d, l.inflight)
	case congested:
		l.lim.refused(sent, time.Now())
	}
	after := l.lim.limit
	l.inflight--
	l.dispatch()
	l.mu.Unlock()
	if after != before { // used: done follows an acquire
		l.t.limitMoved(after - before)
	}
}

// laneStats is one lane's view for TargetStats.
type laneStats struct {
	limit, rate   float64
	wait, service time.Duration
	queued        int
	paced         bool
	used          bool
}

func (l *lane) snapshot(now time.Time) laneStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return laneStats{
		limit: l.lim.limit, rate: l.lim.rate(), service: l.lim.service(),
		wait:   time.Duration(l.waitE * float64(time.Second)),
		queued: l.waiters.Len(), paced: l.pace.wait(now) > 0, used: !l.used.IsZero(),
	}
}

// idle reports whether the lane holds nothing worth keeping: no request in
// flight or queued and no rate-limit hold.
func (l *lane) idle(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight == 0 && l.waiters.Len() == 0 && l.pace.wait(now) == 0
}
