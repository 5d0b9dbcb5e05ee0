// Package report is what the upstream caller reports about its targets
// (TargetStats, ModelStats, and the refusals per second they carry) and
// about each call's attempts (Tried, its Steps). It holds the types and
// their bookkeeping; the caller fills them.
package report

import (
	"math"
	"time"
)

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
	// Sheds splits Shed by reason (lane.ShedQueueFull, lane.ShedWaitBeyond,
	// lane.ShedQueueTimeout, lane.ShedRateLimited, lane.ShedBreakerOpen, …); reasons never seen
	// are absent.
	Sheds map[string]uint64
	// Refusals splits the upstream's congestion refusals (RateLimited and
	// Overloaded) by the limit they hit (lane.Limit…): requests, tokens,
	// input_tokens, output_tokens, concurrency (the model was
	// full, or the refusal named no limit); limits never hit are absent.
	Refusals map[string]uint64
	// RefusalRate is Refusals per second over the last RefusalRateSpan,
	// by limit; limits not hit within it are absent, nil when none was.
	RefusalRate map[string]float64
	// TokenLimit is the token budgets per minute the lanes learnt, summed
	// by limit (tokens, input_tokens, output_tokens), TokensLeft
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
	// LatencyP50 and LatencyP99 are over the last 256 answered attempts
	// (time to the full body for Do, to response headers for Open).
	LatencyP50, LatencyP99 time.Duration
}

// ModelStats is one routed model and its targets.
type ModelStats struct {
	// Name is the requested model; DefaultModelName for the default upstream.
	Name    string
	Targets []TargetStats
}

// Round keeps reported figures (weights, rates) readable: four decimals.
func Round(w float64) float64 { return math.Round(w*1e4) / 1e4 }
