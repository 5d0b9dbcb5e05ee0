package upstream

import (
	"sync"
	"time"
)

// State is a circuit breaker state; its value is the breaker_state metric.
type State int

// Breaker states.
const (
	StateClosed   State = 0
	StateHalfOpen State = 1
	StateOpen     State = 2
)

func (s State) String() string {
	switch s {
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return "closed"
}

// verdict is what an attempt tells the breaker.
type verdict int

const (
	neutral verdict = iota // client errors, cancellations, sheds: say nothing about health
	success
	failure
	// congested is backpressure (429, 529, an overload 503): the target is
	// alive but full. It shrinks the adaptive limit and the weight, and never
	// counts as a breaker failure: a target whose requests partly succeed is
	// congested, not broken.
	congested
)

// probeKind tells report how an attempt was admitted.
type probeKind int

const (
	notProbe   probeKind = iota
	halfOpen             // one of HalfOpenProbes probes of a half-open breaker
	lastResort           // the one attempt an open breaker lets through when nothing else can serve
)

// breaker is a per-target circuit breaker: closed → open on ConsecutiveFailures, or
// on FailureRatio over Window once MinRequests outcomes are in; open → half-open
// after OpenFor, admitting HalfOpenProbes probes; that many probe successes close
// it, one probe failure re-opens it.
type breaker struct {
	opts BreakerOptions

	mu          sync.Mutex
	state       State
	consecutive int
	openUntil   time.Time
	probes      int // probes admitted in this half-open period, minus neutral ones
	probeOK     int
	lastOut     bool      // a last-resort attempt is in flight
	lastAt      time.Time // when the last one was admitted, or the breaker opened
	win         window
}

func newBreaker(opts BreakerOptions) *breaker {
	return &breaker{opts: opts, win: window{span: opts.Window / windowBuckets}}
}

// peek reports whether allow would admit now, without taking a probe.
func (b *breaker) peek(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case StateOpen:
		return !now.Before(b.openUntil)
	case StateHalfOpen:
		return b.probes < b.opts.HalfOpenProbes
	}
	return true
}

// allow admits an attempt; probe says how, and must be passed back to report.
func (b *breaker) allow(now time.Time) (probe probeKind, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateOpen && !now.Before(b.openUntil) {
		b.state, b.probes, b.probeOK = StateHalfOpen, 0, 0
	}
	switch b.state {
	case StateOpen:
		return notProbe, false
	case StateHalfOpen:
		if b.probes >= b.opts.HalfOpenProbes {
			return notProbe, false
		}
		b.probes++
		return halfOpen, true
	}
	return notProbe, true
}

// lastResortEvery spaces last-resort attempts through an open breaker.
const lastResortEvery = time.Second

// allowLastResort admits one attempt at a time, at most one per
// lastResortEvery, through a breaker that is not closed, for a request that no
// other target can serve: an open breaker alone never fails every request
// while the model still answers some. Its success closes the breaker; its
// failure keeps it open.
func (b *breaker) allowLastResort(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateClosed || b.lastOut || now.Sub(b.lastAt) < lastResortEvery {
		return false
	}
	b.lastOut, b.lastAt = true, now
	return true
}

// report records an attempt's verdict and returns the state after it and whether
// it changed.
func (b *breaker) report(now time.Time, probe probeKind, v verdict) (State, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	before := b.state
	if v == success || v == failure {
		b.win.add(now, v == failure)
	}
	switch {
	case probe == lastResort:
		b.lastOut = false
		switch v {
		case success, congested:
			if b.state != StateClosed {
				b.state, b.consecutive = StateClosed, 0
				b.win.reset()
			}
		case failure:
			if b.state != StateClosed {
				b.trip(now)
			}
		}
	case probe == halfOpen && b.state == StateHalfOpen:
		switch v {
		case success, congested:
			b.probeOK++
			if b.probeOK >= b.opts.HalfOpenProbes {
				b.state, b.consecutive = StateClosed, 0
				b.win.reset()
			}
		case failure:
			b.trip(now)
		default:
			b.probes-- // the probe said nothing: let another one through
		}
	case probe != notProbe, b.state != StateClosed:
		// A late answer from an attempt admitted before the state changed.
	case v == success:
		b.consecutive = 0
	case v == failure:
		b.consecutive++
		total, failed := b.win.counts(now)
		if (b.opts.ConsecutiveFailures > 0 && b.consecutive >= b.opts.ConsecutiveFailures) ||
			(b.opts.FailureRatio > 0 && total >= b.opts.MinRequests &&
				float64(failed) >= b.opts.FailureRatio*float64(total)) {
			b.trip(now)
		}
	}
	return b.state, b.state != before
}

func (b *breaker) trip(now time.Time) {
	b.state, b.openUntil, b.consecutive, b.lastAt = StateOpen, now.Add(b.opts.OpenFor), 0, now
	b.win.reset()
}

// snapshot returns the state as seen at now (an expired open breaker shows as
// half-open) and, when open, how long until it admits a probe.
func (b *breaker) snapshot(now time.Time) (State, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateOpen {
		if !now.Before(b.openUntil) {
			return StateHalfOpen, 0
		}
		return StateOpen, b.openUntil.Sub(now)
	}
	return b.state, 0
}

const windowBuckets = 10

// window counts outcomes over a rolling window in windowBuckets buckets.
type window struct {
	span    time.Duration
	buckets [windowBuckets]bucket
}

type bucket struct {
	epoch    int64
	ok, fail int
}

func (w *window) epoch(now time.Time) int64 {
	span := max(int64(w.span), 1)
	return now.UnixNano() / span
}

func (w *window) add(now time.Time, failed bool) {
	e := w.epoch(now)
	b := &w.buckets[uint64(e)%windowBuckets]
	if b.epoch != e {
		*b = bucket{epoch: e}
	}
	if failed {
		b.fail++
	} else {
		b.ok++
	}
}

func (w *window) counts(now time.Time) (total, failed int) {
	e := w.epoch(now)
	for _, b := range w.buckets {
		if b.epoch > e-windowBuckets && b.epoch <= e {
			total += b.ok + b.fail
			failed += b.fail
		}
	}
	return total, failed
}

func (w *window) reset() { w.buckets = [windowBuckets]bucket{} }
