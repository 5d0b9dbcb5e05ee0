// Package breaker is the caller's per-target circuit breaker: closed, open
// and half-open, on consecutive failures or a failure ratio over a rolling
// window. It knows nothing of HTTP; the caller tells it each attempt's
// Verdict.
package breaker

import (
	"sync"
	"time"
)

// Defaults New applies to zero fields of Options.
const (
	// DefaultWindow is the rolling window of the failure ratio.
	DefaultWindow = 30 * time.Second
	// DefaultMinRequests is the sample the ratio rule needs: 20. At a 20%
	// background error rate, 10 samples reach a 0.5 ratio by chance 3.3% of
	// the time and 20 samples 0.26%; a dead target is caught sooner by the
	// consecutive-failure rule anyway.
	DefaultMinRequests = 20
	// DefaultFailureRatio opens the breaker at half the window failing.
	DefaultFailureRatio = 0.5
	// DefaultConsecutiveFailures opens it after 5 failures in a row.
	DefaultConsecutiveFailures = 5
	// DefaultOpenFor is how long an open breaker rejects: 15s. The default
	// deployment has a single target, where an open breaker refuses every
	// request; one half-open probe after 15s costs one request, while 30s
	// doubles every outage as clients see it.
	DefaultOpenFor = 15 * time.Second
	// DefaultHalfOpenProbes is how many probes a half-open breaker admits.
	DefaultHalfOpenProbes = 1
)

// Options configure a breaker; they are also the configuration file's
// [breaker] keys (the toml tags; the zero tag is what the file's 0 means,
// package upstream's options.go).
type Options struct {
	// Window is the rolling window over which FailureRatio is measured.
	// Default 30s (DefaultWindow).
	Window time.Duration `toml:"window" zero:"refused"`
	// MinRequests is how many outcomes the window needs before FailureRatio
	// can open the breaker. Default 20 (DefaultMinRequests). Must be >= 1.
	MinRequests int `toml:"min_requests" zero:"refused"`
	// FailureRatio opens the breaker when failures/outcomes in Window reach
	// it, in (0, 1]. Default 0.5 (DefaultFailureRatio). A negative value
	// here disables the ratio rule; the file has no "off" for it.
	FailureRatio float64 `toml:"failure_ratio" zero:"refused"`
	// ConsecutiveFailures opens the breaker after that many failures in a
	// row. Default 5 (DefaultConsecutiveFailures). 0 in the file (a
	// negative value here) disables this trigger.
	ConsecutiveFailures int `toml:"consecutive_failures" zero:"0 disables this trigger"`
	// OpenFor is how long an open breaker rejects before going half-open
	// (admitting probes). Default 15s (DefaultOpenFor).
	OpenFor time.Duration `toml:"open_for" zero:"refused"`
	// HalfOpenProbes is how many probes a half-open breaker admits; that
	// many successes close it, one failure re-opens it. Default 1
	// (DefaultHalfOpenProbes). Must be >= 1.
	HalfOpenProbes int `toml:"half_open_probes" zero:"refused"`
}

// DefaultOptions is Options with every field at its Default…, as a
// configuration file without the keys has it.
func DefaultOptions() Options { return Options{}.WithDefaults() }

// WithDefaults returns o with its zero fields set to the defaults.
func (b Options) WithDefaults() Options {
	if b.Window <= 0 {
		b.Window = DefaultWindow
	}
	if b.MinRequests <= 0 {
		b.MinRequests = DefaultMinRequests
	}
	if b.FailureRatio == 0 {
		b.FailureRatio = DefaultFailureRatio
	}
	if b.ConsecutiveFailures == 0 {
		b.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if b.OpenFor <= 0 {
		b.OpenFor = DefaultOpenFor
	}
	if b.HalfOpenProbes <= 0 {
		b.HalfOpenProbes = DefaultHalfOpenProbes
	}
	return b
}

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

// Verdict is what an attempt tells the breaker.
type Verdict int

const (
	Neutral Verdict = iota // client errors, cancellations, sheds: say nothing about health
	Success
	Failure
	// Congested is backpressure (429, 529, an overload 503): the target is
	// alive but full. It shrinks the adaptive limit and the weight, and never
	// counts as a breaker failure: a target whose requests partly succeed is
	// congested, not broken.
	Congested
)

// Probe tells Report how an attempt was admitted.
type Probe int

const (
	NotProbe   Probe = iota
	HalfOpen         // one of HalfOpenProbes probes of a half-open breaker
	LastResort       // the one attempt an open breaker lets through when nothing else can serve
)

// Breaker is a per-target circuit breaker: closed → open on ConsecutiveFailures, or
// on FailureRatio over Window once MinRequests outcomes are in; open → half-open
// after OpenFor, admitting HalfOpenProbes probes; that many probe successes close
// it, one probe failure re-opens it.
type Breaker struct {
	opts Options

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

// New returns a closed breaker; zero fields of opts take their defaults.
func New(opts Options) *Breaker {
	opts = opts.WithDefaults()
	return &Breaker{opts: opts, win: window{span: opts.Window / windowBuckets}}
}

// Peek reports whether Allow would admit now, without taking a probe.
func (b *Breaker) Peek(now time.Time) bool {
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
func (b *Breaker) Allow(now time.Time) (probe Probe, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateOpen && !now.Before(b.openUntil) {
		b.state, b.probes, b.probeOK = StateHalfOpen, 0, 0
	}
	switch b.state {
	case StateOpen:
		return NotProbe, false
	case StateHalfOpen:
		if b.probes >= b.opts.HalfOpenProbes {
			return NotProbe, false
		}
		b.probes++
		return HalfOpen, true
	}
	return NotProbe, true
}

// LastResortEvery spaces last-resort attempts through an open breaker.
const LastResortEvery = time.Second

// AllowLastResort admits one attempt at a time, at most one per
// LastResortEvery, through a breaker that is not closed, for a request that no
// other target can serve: an open breaker alone never fails every request
// while the model still answers some. Its success closes the breaker; its
// failure keeps it open.
func (b *Breaker) AllowLastResort(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateClosed || b.lastOut || now.Sub(b.lastAt) < LastResortEvery {
		return false
	}
	b.lastOut, b.lastAt = true, now
	return true
}

// Report records an attempt's Verdict and returns the state after it and whether
// it changed.
func (b *Breaker) Report(now time.Time, probe Probe, v Verdict) (State, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	before := b.state
	if v == Success || v == Failure {
		b.win.add(now, v == Failure)
	}
	switch {
	case probe == LastResort:
		b.lastOut = false
		switch v {
		case Success, Congested:
			if b.state != StateClosed {
				b.state, b.consecutive = StateClosed, 0
				b.win.reset()
			}
		case Failure:
			if b.state != StateClosed {
				b.Trip(now)
			}
		}
	case probe == HalfOpen && b.state == StateHalfOpen:
		switch v {
		case Success, Congested:
			b.probeOK++
			if b.probeOK >= b.opts.HalfOpenProbes {
				b.state, b.consecutive = StateClosed, 0
				b.win.reset()
			}
		case Failure:
			b.Trip(now)
		default:
			b.probes-- // the probe said nothing: let another one through
		}
	case probe != NotProbe, b.state != StateClosed:
		// A late answer from an attempt admitted before the state changed.
	case v == Success:
		b.consecutive = 0
	case v == Failure:
		b.consecutive++
		total, failed := b.win.counts(now)
		if (b.opts.ConsecutiveFailures > 0 && b.consecutive >= b.opts.ConsecutiveFailures) ||
			(b.opts.FailureRatio > 0 && total >= b.opts.MinRequests &&
				float64(failed) >= b.opts.FailureRatio*float64(total)) {
			b.Trip(now)
		}
	}
	return b.state, b.state != before
}

func (b *Breaker) Trip(now time.Time) {
	b.state, b.openUntil, b.consecutive, b.lastAt = StateOpen, now.Add(b.opts.OpenFor), 0, now
	b.win.reset()
}

// Snapshot returns the state as seen at now (an expired open breaker shows as
// half-open) and, when open, how long until it admits a probe.
func (b *Breaker) Snapshot(now time.Time) (State, time.Duration) {
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
