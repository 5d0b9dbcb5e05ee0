package upstream

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// outcome classifies one attempt; its string is the attempts_total label.
type outcome int

const (
	outSuccess outcome = iota
	outRateLimited
	outServerError
	outTimeout
	outClientError
	outShed
	outConnError
	outCanceled // the client went away: counted as sent, in no other column
)

var outcomeNames = [...]string{"success", "rate_limited", "server_error", "timeout", "client_error", "shed", "conn_error", "canceled"}

func (o outcome) String() string { return outcomeNames[o] }

// verdict maps an outcome to what it tells the breaker and the weight. A 429 is a
// failure: the target cannot serve now, and shifting load to a fallback is what
// the operator wants; a 4xx pass-through, a shed and a cancellation say nothing.
func (o outcome) verdict() verdict {
	switch o {
	case outSuccess:
		return success
	case outRateLimited, outServerError, outTimeout, outConnError:
		return failure
	}
	return neutral
}

func classify(status int, err error) outcome {
	switch {
	case err != nil && isTimeout(err):
		return outTimeout
	case err != nil:
		return outConnError
	case status == 429:
		return outRateLimited
	case status >= 500:
		return outServerError
	case status >= 400:
		return outClientError
	}
	return outSuccess
}

// TargetStats is one target's state and counters since start.
type TargetStats struct {
	Name     string
	Upstream string
	// Model is the model sent upstream; "" means the requested model unchanged.
	Model string
	// State is "closed", "open" or "half-open".
	State string
	// Weight is the current dynamic weight; ConfiguredWeight the one it recovers to.
	Weight, ConfiguredWeight float64
	// Inflight counts attempts in flight; Queued requests waiting for a slot.
	Inflight, Queued int
	// Sent counts attempts sent; the others split them by outcome, except Shed
	// (requests refused by a full queue, never sent). Connection errors count as
	// ServerError; cancellations by the client count only in Sent.
	Sent, Success, RateLimited, ServerError, Timeout, ClientError, Shed uint64
	// SuccessRate is Success / (Success + RateLimited + ServerError + Timeout), 1
	// before any such outcome.
	SuccessRate float64
	// LatencyP50 and LatencyP99 are over the last latencyRing answered attempts
	// (time to the full body for Do, to response headers for Open).
	LatencyP50, LatencyP99 time.Duration
}

// ModelStats is one routed model and its targets.
type ModelStats struct {
	// Name is the requested model; DefaultModelName for the default upstream.
	Name    string
	Targets []TargetStats
}

// DefaultModelName names the pseudo-model of the default upstream in Snapshot.
const DefaultModelName = "*"

const latencyRing = 256

type targetStats struct {
	sent, success, rateLimited, serverError, timeout, clientError, shed atomic.Uint64
	inflight, queued                                                    atomic.Int64

	mu   sync.Mutex
	lat  [latencyRing]time.Duration
	n    int // filled entries
	next int
}

func (s *targetStats) count(o outcome) {
	switch o {
	case outSuccess:
		s.success.Add(1)
	case outRateLimited:
		s.rateLimited.Add(1)
	case outServerError, outConnError:
		s.serverError.Add(1)
	case outTimeout:
		s.timeout.Add(1)
	case outClientError:
		s.clientError.Add(1)
	case outShed:
		s.shed.Add(1)
	}
}

func (s *targetStats) latency(d time.Duration) {
	s.mu.Lock()
	s.lat[s.next] = d
	s.next = (s.next + 1) % latencyRing
	s.n = min(s.n+1, latencyRing)
	s.mu.Unlock()
}

func (s *targetStats) percentiles() (p50, p99 time.Duration) {
	s.mu.Lock()
	lat := slices.Clone(s.lat[:s.n])
	s.mu.Unlock()
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	at := func(q float64) time.Duration { return lat[min(int(q*float64(len(lat))), len(lat)-1)] }
	return at(0.50), at(0.99)
}

func (c *Caller) targetStats(m *member, now time.Time) TargetStats {
	t := m.t
	s := &t.stats
	state, _ := t.breaker.snapshot(now)
	ts := TargetStats{
		Name: t.name, Upstream: t.up.cfg.Name, Model: t.model, State: state.String(),
		Weight: roundWeight(m.effectiveWeight()), ConfiguredWeight: m.weight,
		Inflight: int(s.inflight.Load()), Queued: int(s.queued.Load()),
		Sent: s.sent.Load(), Success: s.success.Load(), RateLimited: s.rateLimited.Load(),
		ServerError: s.serverError.Load(), Timeout: s.timeout.Load(), ClientError: s.clientError.Load(),
		Shed: s.shed.Load(), SuccessRate: 1,
	}
	if judged := ts.Success + ts.RateLimited + ts.ServerError + ts.Timeout; judged > 0 {
		ts.SuccessRate = float64(ts.Success) / float64(judged)
	}
	ts.LatencyP50, ts.LatencyP99 = s.percentiles()
	return ts
}

// Snapshot returns every route's targets in configuration order, then the default
// upstream as the pseudo-model DefaultModelName when one is configured.
func (c *Caller) Snapshot() []ModelStats {
	now := c.now()
	routes := slices.Clone(c.order)
	if c.def != nil {
		routes = append(routes, c.def)
	}
	out := make([]ModelStats, 0, len(routes))
	for _, r := range routes {
		ms := ModelStats{Name: r.name, Targets: make([]TargetStats, 0, len(r.flat))}
		for _, m := range r.flat {
			ms.Targets = append(ms.Targets, c.targetStats(m, now))
		}
		out = append(out, ms)
	}
	return out
}
