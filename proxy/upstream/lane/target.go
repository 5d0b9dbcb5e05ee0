// Package lane admits a target's requests: the unit of admission is a lane
// (one target, and one forwarded key on it), which holds the adaptive
// concurrency limit, the pacing of sends, the retry budget, the class-ordered
// queue and the upstream's rate-limit hold; and a pool bounds one request
// class of an upstream. The caller (package upstream) tries targets, each
// through its lane.
package lane

import (
	"errors"
	"net/http"
	"time"
)

// ErrShed matches every refusal of a lane or pool: the request never reached
// the upstream (upstream.ErrShed is this error).
var ErrShed = errors.New("capacity exceeded")

// Target is what a lane reports to: the target it admits for, which keeps
// the counters and metrics.
type Target interface {
	// Name is the target's name, for messages.
	Name() string
	// LimitMoved and PaceMoved report a change of the lane's limit (in
	// slots) and of its pace below one slot (sends per second).
	LimitMoved(d float64)
	PaceMoved(d float64)
	// Queued moves the count of requests waiting in the lane's queue.
	Queued(d int64)
	// QueueWait reports the wait of a request that was granted a slot.
	QueueWait(d time.Duration)
	// RetrySent counts a retry sent within the retry budget, BudgetWaited
	// one that found it spent, LoneRetry one a lone lane sent outside it.
	RetrySent()
	BudgetWaited()
	LoneRetry()
	// Abandoned counts an attempt whose client had gone before the answer.
	Abandoned()
	// Rand is a uniform float in [0, 1): the phase of sends after a hold.
	Rand() float64
}

// Outcome is what an attempt's answer tells its lane (Lane.Done).
type Outcome int

const (
	// Other teaches the lane nothing: the slot is returned.
	Other Outcome = iota
	// Answered is an answer: its time per answer, and the limit grows.
	Answered
	// Congested is a congestion refusal (429, 529, an overload 503): the
	// limit is cut.
	Congested
)

// AtLeastSecond rounds a wait up to whole seconds, at least one: the
// Retry-After a refused client is told.
func AtLeastSecond(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	// Retry-After is sent in whole seconds: round up so clients never come back early.
	return (d + time.Second - 1).Truncate(time.Second)
}

// Wait is how long new attempts must wait at now for the upstream's
// rate-limit state (a Retry-After, an exhausted rate-limit header).
func (l *Lane) Wait(now time.Time) time.Duration { return l.pace.wait(now) }

// Hold keeps new attempts back until t.
func (l *Lane) Hold(t time.Time) { l.pace.hold(t) }

// Observe reads the rate-limit headers of an answer to a request sent at
// sent: it learns the token budgets from them, and holds the lane, for at
// most limit, when a budget is exhausted; it returns the hold, 0 for none.
func (l *Lane) Observe(now, sent time.Time, h http.Header, limit time.Duration) time.Duration {
	l.mu.Lock()
	l.tok.observe(now, sent, h)
	l.mu.Unlock()
	return l.pace.observe(now, h, limit)
}

// Present is how many requests are on the lane (see Lane.lone).
func (l *Lane) Present() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.present
}

// HeldUntil is when the upstream's rate-limit hold of the lane ends.
func (l *Lane) HeldUntil() time.Time {
	l.pace.mu.Lock()
	defer l.pace.mu.Unlock()
	return l.pace.until
}

// Ranks lists the ranks of the queued requests, in the order they are
// queued.
func (l *Lane) Ranks() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ranks []int
	for e := l.waiters.Front(); e != nil; e = e.Next() {
		ranks = append(ranks, e.Value.(*waiter).rank)
	}
	return ranks
}

// Learnt sets the lane's limit as if it had learnt it, past its cold
// start: for a caller's tests that put other parts than the lane under test.
func (l *Lane) Learnt(limit float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lim.limit = limit
}

// LimitState is the lane's limit, its pace below one slot, and whether it
// was ever used (its limit is counted in the target's sum from first use).
func (l *Lane) LimitState() (limit, pace float64, used bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lim.limit, l.lim.belowOne(), !l.used.IsZero()
}
