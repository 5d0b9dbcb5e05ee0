package proxy

import (
	"context"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/observe"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// counters are the process-lifetime totals behind /stats.
type counters struct {
	requests, hitsExact, hitsSemantic, misses, bypass, stale atomic.Uint64
	missesSampled                                            atomic.Uint64
	coalesced, errors                                        atomic.Uint64
	delivered                                                atomic.Uint64
}

func newCounters() *counters { return &counters{} }

func (c *counters) outcome(o string) {
	c.requests.Add(1)
	switch o {
	case OutcomeHitExact:
		c.hitsExact.Add(1)
	case OutcomeHitSemantic:
		c.hitsSemantic.Add(1)
	case OutcomeMiss:
		c.misses.Add(1)
	case OutcomeMissSampled:
		c.missesSampled.Add(1)
	case OutcomeBypass:
		c.bypass.Add(1)
	case OutcomeStale:
		c.stale.Add(1)
	}
}

// Stats is the body of GET /stats.
type Stats struct {
	Requests     uint64 `json:"requests"`
	HitsExact    uint64 `json:"hits_exact"`
	HitsSemantic uint64 `json:"hits_semantic"`
	Misses       uint64 `json:"misses"`
	// MissesSampled are would-be semantic hits answered fresh to measure
	// the false-hit rate (X-Breakwater-Cache: miss-sampled).
	MissesSampled uint64            `json:"misses_sampled"`
	Bypass        uint64            `json:"bypass"`
	Stale         uint64            `json:"stale"`
	HitRate       float64           `json:"hit_rate"`
	Upstream      UpstreamStats     `json:"upstream"`
	Entries       EntryStats        `json:"entries"`
	WriteBack     WriteBackStats    `json:"write_back"`
	Models        []ModelStatsJSON  `json:"models"`
	Degraded      map[string]string `json:"degraded,omitempty"`
	// Fleet is Options.FleetStats's: budgets and the shared store.
	Fleet any `json:"fleet,omitempty"`
	// Windows are rolling figures over the last "1m", "15m" and "1h".
	Windows map[string]WindowStats `json:"windows"`
	// Timeline is the last hour, one point per minute that had requests,
	// oldest first (quiet minutes are left out).
	Timeline []TimelinePoint `json:"timeline"`
	// CapacityByHour counts at-capacity answers (429s and sheds) by UTC hour
	// of day since start: the peak pattern operators plan around.
	CapacityByHour [24]uint64 `json:"capacity_by_hour"`
	// Cache holds the cache's own counters (guard rejections, write-back).
	Cache *CacheStats `json:"cache,omitempty"`
	// Verify is the judge's counters and the live false-hit estimate.
	Verify *VerifyStats `json:"verify,omitempty"`
	// Tokens are the tokens saved and spent, by model and by tenant, and
	// their cost when prices are configured.
	Tokens TokenStats `json:"tokens"`
	// Responses is the Responses API's id-to-upstream registry.
	Responses ResponsesStats `json:"responses"`
	// Goodput is what reached clients still waiting, against what the
	// model made for nobody and what was shed.
	Goodput GoodputStats `json:"goodput"`
}

// GoodputStats: answers delivered (2xx written to a client still
// connected), the model's answers made for clients that had gone (summed
// over targets), and requests shed before the model, by reason.
type GoodputStats struct {
	Delivered uint64            `json:"delivered"`
	ForNobody uint64            `json:"for_nobody"`
	Sheds     map[string]uint64 `json:"sheds"`
}

// ResponsesStats describe the registry of Responses ids and the upstream
// that created each (per process, bounded by DefaultResponseOwners).
type ResponsesStats struct {
	KnownIDs int `json:"known_ids"`
}

// CacheStats are the cache tiers' internal counters and the index's state
// (cache.Counters): guard and long-text rejections, exact-only lookups,
// promotions, cross-user refusals and agreements (cache.semantic.cross_user),
// embedder, index and write failures, and the index's state (off, opening,
// ready or failed) with how long its open took (so far).
type CacheStats = cache.Counters

// UpstreamStats counts what reached, or was kept from, the model endpoints.
type UpstreamStats struct {
	// Calls is the number of upstream calls the proxy made (one per miss
	// flight, whatever the retries inside it).
	Calls uint64 `json:"calls"`
	// Saved is the number of requests answered without an upstream call:
	// hits of every tier, stale answers and coalesced followers.
	Saved       uint64 `json:"saved"`
	Coalesced   uint64 `json:"coalesced"`
	RateLimited uint64 `json:"rate_limited"`
	Timeouts    uint64 `json:"timeouts"`
	Errors      uint64 `json:"errors"`
}

// EntryStats are the sizes of the two tiers.
type EntryStats struct {
	Exact int `json:"exact"`
	// Semantic is -1 when the index cannot be counted (down or absent).
	Semantic int `json:"semantic"`
}

// WriteBackStats describe the asynchronous index write queue.
type WriteBackStats struct {
	Queued  int    `json:"queued"`
	Dropped uint64 `json:"dropped"`
}

// ModelStatsJSON is one routed model and its targets.
type ModelStatsJSON struct {
	Name    string            `json:"name"`
	Targets []TargetStatsJSON `json:"targets"`
}

// TargetStatsJSON is one target's health as /stats and /dashboard show it.
type TargetStatsJSON struct {
	Name        string    `json:"name"`
	Upstream    string    `json:"upstream"`
	Model       string    `json:"model"`
	State       string    `json:"state"`
	Weight      float64   `json:"weight"`
	Configured  float64   `json:"configured_weight"`
	Inflight    int       `json:"inflight"`
	Queued      int       `json:"queued"`
	Sent        uint64    `json:"sent"`
	Success     uint64    `json:"success"`
	SuccessRate float64   `json:"success_rate"`
	RateLimited uint64    `json:"rate_limited"`
	ServerError uint64    `json:"server_error"`
	Timeout     uint64    `json:"timeout"`
	ClientError uint64    `json:"client_error"`
	Shed        uint64    `json:"shed"`
	LatencyMS   LatencyMS `json:"latency_ms"`
	// Overloaded counts congestion signals other than 429 (529, overload 503).
	Overloaded uint64 `json:"overloaded"`
	// Sheds splits Shed by reason (queue_full, wait_beyond_deadline,
	// queue_timeout, rate_limited, breaker_open).
	Sheds map[string]uint64 `json:"sheds"`
	// Refusals splits the upstream's congestion refusals by the limit they
	// hit (requests, tokens, input_tokens, output_tokens, concurrency).
	Refusals map[string]uint64 `json:"refusals,omitempty"`
	// RefusalsPerS is Refusals per second over the last 10 s
	// (upstream.RefusalRateSpan), by limit.
	RefusalsPerS map[string]float64 `json:"refusals_per_s,omitempty"`
	// TokenLimit and TokensLeft are the token budgets per minute the lanes
	// learnt, and what is left of them.
	TokenLimit map[string]float64 `json:"token_limit_per_min,omitempty"`
	TokensLeft map[string]float64 `json:"tokens_left,omitempty"`
	// Limit is the adaptive concurrency limit (summed over Lanes, one per
	// forwarded key plus a common one); ServiceRate the answers per second it
	// sustains; QueueWaitMS the recent queue wait; Paced whether rate-limit
	// state holds a lane back.
	Limit       float64 `json:"limit"`
	Lanes       int     `json:"lanes"`
	ServiceRate float64 `json:"service_rate"`
	QueueWaitMS float64 `json:"queue_wait_ms"`
	Paced       bool    `json:"paced"`
	// PacePerS is the send rate of lanes whose limit is below one slot (a
	// sidecar sharing the model with others), 0 when none is.
	PacePerS float64 `json:"pace_per_s"`
	// RetryBudget is the retry budget of congestion refusals: retries sent
	// within it, retries that found it spent (and waited or were shed), and
	// the retries left in the common lane.
	RetryBudget RetryBudgetJSON `json:"retry_budget"`
	// Abandoned counts attempts whose client had gone before the answer.
	Abandoned uint64 `json:"abandoned"`
}

// RetryBudgetJSON is a target's retry budget for /stats.
type RetryBudgetJSON struct {
	Sent   uint64  `json:"sent"`
	Waited uint64  `json:"waited"`
	Left   float64 `json:"left"`
}

// LatencyMS are recent latency percentiles in milliseconds.
type LatencyMS struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// Snapshot returns the current /stats body.
func (s *Server) Snapshot() Stats {
	c := s.stats
	st := Stats{
		Requests:      c.requests.Load(),
		HitsExact:     c.hitsExact.Load(),
		HitsSemantic:  c.hitsSemantic.Load(),
		Misses:        c.misses.Load(),
		MissesSampled: c.missesSampled.Load(),
		Bypass:        c.bypass.Load(),
		Stale:         c.stale.Load(),
	}
	if s.opts.FleetStats != nil {
		st.Fleet = s.opts.FleetStats()
	}
	hits := st.HitsExact + st.HitsSemantic + st.Stale
	if eligible := st.Requests - st.Bypass; eligible > 0 {
		st.HitRate = observe.Ratio(hits, eligible)
	}
	st.Goodput = GoodputStats{Delivered: c.delivered.Load(), Sheds: map[string]uint64{}}
	st.Upstream = UpstreamStats{
		Calls:     s.flow.Calls(),
		Coalesced: c.coalesced.Load(),
		Saved:     hits + c.coalesced.Load(),
		Errors:    c.errors.Load(),
	}
	for _, m := range s.opts.Caller.Snapshot() {
		mj := ModelStatsJSON{Name: m.Name, Targets: make([]TargetStatsJSON, 0, len(m.Targets))}
		for _, t := range m.Targets {
			st.Upstream.RateLimited += t.RateLimited + t.Overloaded
			st.Upstream.Timeouts += t.Timeout
			st.Goodput.ForNobody += t.Abandoned
			for r, n := range t.Sheds {
				st.Goodput.Sheds[r] += n
			}
			mj.Targets = append(mj.Targets, targetJSON(t))
		}
		st.Models = append(st.Models, mj)
	}
	if st.Models == nil {
		st.Models = []ModelStatsJSON{}
	}
	s.sampleTargets()
	now := s.opts.Now()
	st.Windows = s.obs.Windows(now)
	st.Timeline = s.obs.Timeline(now)
	st.CapacityByHour = s.obs.CapacityByHour()
	st.Verify = s.opts.Verify.Stats()
	st.Responses.KnownIDs = s.flow.Owners().Size()
	st.Tokens = s.obs.Tokens()
	if s.opts.Cache != nil {
		cs := s.opts.Cache.Stats(context.Background())
		st.Entries = EntryStats{Exact: cs.ExactEntries, Semantic: cs.IndexEntries}
		st.WriteBack = WriteBackStats{Queued: cs.QueueDepth, Dropped: cs.QueueDrops}
		st.Cache = &cs.Counters
		for tier, err := range s.opts.Cache.Health() {
			if err != nil {
				if st.Degraded == nil {
					st.Degraded = map[string]string{}
				}
				st.Degraded[tier] = err.Error()
			}
		}
	}
	return st
}

func targetJSON(t upstream.TargetStats) TargetStatsJSON {
	return TargetStatsJSON{
		Name: t.Name, Upstream: t.Upstream, Model: t.Model, State: t.State,
		Weight: t.Weight, Configured: t.ConfiguredWeight,
		Inflight: t.Inflight, Queued: t.Queued,
		Sent: t.Sent, Success: t.Success, SuccessRate: math.Round(t.SuccessRate*1e4) / 1e4,
		RateLimited: t.RateLimited, ServerError: t.ServerError, Timeout: t.Timeout,
		ClientError: t.ClientError, Shed: t.Shed, Overloaded: t.Overloaded, Sheds: t.Sheds,
		Refusals: t.Refusals, RefusalsPerS: t.RefusalRate, TokenLimit: t.TokenLimit, TokensLeft: t.TokensLeft,
		Limit: t.Limit, Lanes: t.Lanes, ServiceRate: t.ServiceRate,
		QueueWaitMS: float64(t.QueueWait.Microseconds()) / 1000, Paced: t.Paced,
		PacePerS: t.PaceRate, Abandoned: t.Abandoned,
		RetryBudget: RetryBudgetJSON{Sent: t.Retries, Waited: t.RetryBudgetWaits, Left: t.RetryBudget},
		LatencyMS: LatencyMS{
			P50: float64(t.LatencyP50.Microseconds()) / 1000,
			P99: float64(t.LatencyP99.Microseconds()) / 1000,
		},
	}
}

func (s *Server) handleStats(c echo.Context) error {
	return c.JSON(http.StatusOK, s.Snapshot())
}
