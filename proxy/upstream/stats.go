package upstream

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
	reports "github.com/breakwater-dev/breakwater/proxy/upstream/report"
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
	outCanceled   // the client went away: counted as sent, in no other column
	outOverloaded // a congestion signal other than 429: 529, an overload 503, a wire format's verdict
)

var outcomeNames = [...]string{"success", "rate_limited", "server_error", "timeout", "client_error", "shed", "conn_error", "canceled", "overloaded"}

func (o outcome) String() string { return outcomeNames[o] }

// verdict maps an outcome to what it tells the breaker, the weight and the
// adaptive limit. A 429 or an overload is congestion: the target is alive but
// full, so the limit and the weight shrink and the breaker is not told; a 4xx
// pass-through, a shed and a cancellation say nothing.
func (o outcome) verdict() verdict {
	switch o {
	case outSuccess:
		return success
	case outRateLimited, outOverloaded:
		return congested
	case outServerError, outTimeout, outConnError:
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

// DefaultModelName names the pseudo-model of the default upstream in Snapshot.
const DefaultModelName = "*"

// latencyRing is how many answered attempts the latency percentiles are
// over (TargetStats.LatencyP50 names the number).
const latencyRing = 256

type targetStats struct {
	sent, success, rateLimited, overloaded, serverError, timeout, clientError, shed atomic.Uint64
	inflight, queued                                                                atomic.Int64
	// retries counts retries admitted under the retry budget; budgetWaits
	// retries that found it spent and had to wait for a token (or were shed);
	// abandoned attempts whose client went away before the answer (the
	// provider produced it for nobody).
	retries, budgetWaits, abandoned atomic.Uint64
	// loneRetries counts retries a lone lane sent outside the budget.
	loneRetries atomic.Uint64
	// refusals counts congestion refusals by lane.Limits; recent those of
	// the last RefusalRateSpan, for their rate.
	refusals [len(lane.Limits)]atomic.Uint64
	recent   reports.RefusalRing

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
	case outOverloaded:
		s.overloaded.Add(1)
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
	state, _ := t.breaker.Snapshot(now)
	ts := TargetStats{
		Name: t.name, Upstream: t.up.cfg.Name, Model: t.model, State: state.String(),
		Weight: roundWeight(m.effectiveWeight()), ConfiguredWeight: m.weight,
		Inflight: int(s.inflight.Load()), Queued: int(s.queued.Load()),
		Sent: s.sent.Load(), Success: s.success.Load(), RateLimited: s.rateLimited.Load(), Overloaded: s.overloaded.Load(),
		ServerError: s.serverError.Load(), Timeout: s.timeout.Load(), ClientError: s.clientError.Load(),
		Shed: s.shed.Load(), SuccessRate: 1,
	}
	if judged := ts.Success + ts.RateLimited + ts.Overloaded + ts.ServerError + ts.Timeout; judged > 0 {
		ts.SuccessRate = float64(ts.Success) / float64(judged)
	}
	for i, r := range lane.ShedReasons {
		if n := t.counts.sheds[i].Load(); n > 0 {
			if ts.Sheds == nil {
				ts.Sheds = make(map[string]uint64)
			}
			ts.Sheds[r] = n
		}
	}
	sum := t.summary(now)
	ts.Limit, ts.Lanes, ts.ServiceRate = roundWeight(sum.limit), sum.count, roundWeight(sum.rate)
	ts.QueueWait, ts.Paced, ts.PaceRate = sum.wait, sum.paced, roundWeight(sum.pace)
	ts.Retries, ts.RetryBudgetWaits, ts.Abandoned = s.retries.Load(), s.budgetWaits.Load(), s.abandoned.Load()
	ts.LoneRetries = s.loneRetries.Load()
	ts.RetryBudget = roundWeight(t.lanes.For("").Snapshot(now).Budget)
	ts.TokenLimit, ts.TokensLeft = sum.tokenLimit, sum.tokensLeft
	for i, l := range lane.Limits {
		if n := s.refusals[i].Load(); n > 0 {
			if ts.Refusals == nil {
				ts.Refusals = make(map[string]uint64)
			}
			ts.Refusals[l] = n
		}
	}
	ts.RefusalRate = s.recent.Rates(now)
	ts.LatencyP50, ts.LatencyP99 = s.percentiles()
	return ts
}

// Snapshot returns every route's targets in configuration order, then the default
// upstream as the pseudo-model DefaultModelName when one is configured; its
// targets are the common one and one per model it served (in first-use order).
func (c *Caller) Snapshot() []ModelStats {
	now := c.now()
	routes := slices.Clone(c.order)
	if c.def != nil {
		routes = append(routes, c.def)
	}
	out := make([]ModelStats, 0, len(routes))
	for _, r := range routes {
		flat := r.flat
		if r == c.def {
			flat = append(slices.Clone(flat), c.modelMembers()...)
		}
		ms := ModelStats{Name: r.name, Targets: make([]TargetStats, 0, len(flat))}
		for _, m := range flat {
			ms.Targets = append(ms.Targets, c.targetStats(m, now))
		}
		out = append(out, ms)
	}
	return out
}
