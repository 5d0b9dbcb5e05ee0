package upstream

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
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
	// (requests refused before reaching the upstream, never sent). Overloaded
	// counts congestion signals other than 429 (529, overload 503s).
	// Connection errors count as ServerError; cancellations by the client count
	// only in Sent.
	Sent, Success, RateLimited, Overloaded, ServerError, Timeout, ClientError, Shed uint64
	// Sheds splits Shed by reason (ShedQueueFull, ShedWaitBeyond,
	// ShedQueueTimeout, ShedRateLimited, ShedBreakerOpen); reasons never seen
	// are absent.
	Sheds map[string]uint64
	// Refusals splits the upstream's congestion refusals (RateLimited and
	// Overloaded) by the limit they hit: LimitRequests, LimitTokens,
	// LimitInputTokens, LimitOutputTokens, LimitConcurrency (the model was
	// full, or the refusal named no limit); limits never hit are absent.
	Refusals map[string]uint64
	// RefusalRate is Refusals per second over the last RefusalRateSpan,
	// by limit; limits not hit within it are absent, nil when none was.
	RefusalRate map[string]float64
	// TokenLimit is the token budgets per minute the lanes learnt, summed
	// by limit (LimitTokens, LimitInputTokens, LimitOutputTokens), TokensLeft
	// what is left of them now; nil before any was learnt.
	TokenLimit, TokensLeft map[string]float64
	// SuccessRate is Success / (Success + RateLimited + Overloaded + ServerError
	// + Timeout), 1 before any such outcome.
	SuccessRate float64
	// Limit is the adaptive concurrency limit, summed over the target's lanes
	// (one per forwarded key, plus the common one); Lanes counts them.
	Limit float64
	Lanes int
	// ServiceRate is the measured answers per second the lanes can serve at
	// their limits (limit ÷ time per answer); 0 before any answer.
	ServiceRate float64
	// QueueWait is the longest recent queue wait of a lane (a moving average).
	QueueWait time.Duration
	// Paced is true while a lane is held back by the upstream's rate-limit state.
	Paced bool
	// PaceRate is the lanes' summed send rate, in attempts per second, of
	// those whose limit is below one slot (a sidecar sharing the model with
	// others sends one request every 1 ÷ PaceRate seconds); 0 when none is.
	PaceRate float64
	// Retries counts retries of congestion refusals sent under the retry
	// budget; RetryBudgetWaits those that found it spent and waited for a
	// token or were shed; RetryBudget is the retries left in the common lane
	// (each first attempt adds 0.1, each retry takes one, at most 10).
	Retries, RetryBudgetWaits uint64
	RetryBudget               float64
	// LoneRetries counts retries of congestion refusals a lone lane sent
	// once the refusal's Retry-After had passed, outside the budget and the
	// pacing (a lane holding a handful of requests: see lane.lone).
	LoneRetries uint64
	// Abandoned counts attempts whose client went away before the answer:
	// answers the provider produced (and bills) for nobody.
	Abandoned uint64
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
	recent   refusalRing

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
	ts.RefusalRate = s.recent.rates(now)
	ts.LatencyP50, ts.LatencyP99 = s.percentiles()
	return ts
}

// RefusalRateSpan is the span TargetStats.RefusalRate is measured over:
// long enough that a dashboard polling every few seconds sees each refusal
// in more than one poll, short enough that the figure is what the model
// does now (the cumulative Refusals say what it did since start).
const RefusalRateSpan = 10 * time.Second

// refusalRing counts refusals by limit in one-second cells over the last
// RefusalRateSpan.
type refusalRing struct {
	mu  sync.Mutex
	sec [refusalCells]int64 // the unix second each cell counts
	n   [refusalCells][len(lane.Limits)]uint32
}

const refusalCells = int(RefusalRateSpan / time.Second)

// add counts a refusal on lane.Limits[limit] at now.
func (r *refusalRing) add(now time.Time, limit int) {
	sec := now.Unix()
	i := int(sec % int64(refusalCells))
	r.mu.Lock()
	if r.sec[i] != sec {
		r.sec[i], r.n[i] = sec, [len(lane.Limits)]uint32{}
	}
	r.n[i][limit]++
	r.mu.Unlock()
}

// rates are the refusals per second by limit over the RefusalRateSpan
// ending at now; nil when there were none.
func (r *refusalRing) rates(now time.Time) map[string]float64 {
	sec := now.Unix()
	var sum [len(lane.Limits)]uint32
	r.mu.Lock()
	for i := range r.sec {
		if s := r.sec[i]; s > sec-int64(refusalCells) && s <= sec {
			for l, n := range r.n[i] {
				sum[l] += n
			}
		}
	}
	r.mu.Unlock()
	var out map[string]float64
	for l, n := range sum {
		if n > 0 {
			if out == nil {
				out = make(map[string]float64, len(lane.Limits))
			}
			out[lane.Limits[l]] = roundWeight(float64(n) / RefusalRateSpan.Seconds())
		}
	}
	return out
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
