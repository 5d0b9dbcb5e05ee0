package observe

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/flow"
)

// window keeps per-minute buckets of the last hour, and capacity events by
// hour of day, for the rolling figures of /stats and the dashboard. record,
// on every request, only adds to atomic counters of the current minute; mu
// guards turning a bucket over to a new minute and the per-target maps.
type window struct {
	mu       sync.Mutex
	buckets  [60]bucket
	byHour   [24]uint64 // at-capacity events (upstream 429/503/529, sheds) by UTC hour
	lastTgts map[string]TargetCum
}

type bucket struct {
	// minute is the unix minute the bucket holds; stale buckets are
	// skipped. It is stored after the counters are cleared, so a request
	// that sees the current minute adds to a cleared bucket.
	minute   atomic.Int64
	requests atomic.Uint64
	eligible atomic.Uint64
	hits     atomic.Uint64
	saved    atomic.Uint64
	calls    atomic.Uint64
	// Tokens reused instead of spent, and their cost in 1e-9 USD.
	savedIn, savedOut, savedNano atomic.Uint64
	// Tokens the auto judge's calls spent, and their cost in 1e-9 USD.
	judgeIn, judgeOut, judgeNano atomic.Uint64
	rateLimited                  map[string]uint64 // by target; guarded by window.mu
	sent                         map[string]uint64 // by target; guarded by window.mu
}

// TargetCum are a target's cumulative counts (upstream.TargetStats): sent,
// rate limited, and at capacity (rate limited and shed).
type TargetCum struct{ Sent, RateLimited, Capacity uint64 }

func newWindow() *window { return &window{lastTgts: map[string]TargetCum{}} }

func (w *window) bucketLocked(now time.Time) *bucket {
	m := now.Unix() / 60
	b := &w.buckets[m%60]
	if b.minute.Load() != m {
		for _, c := range []*atomic.Uint64{&b.requests, &b.eligible, &b.hits, &b.saved, &b.calls, &b.savedIn, &b.savedOut, &b.savedNano, &b.judgeIn, &b.judgeOut, &b.judgeNano} {
			c.Store(0)
		}
		b.rateLimited, b.sent = nil, nil
		b.minute.Store(m)
	}
	return b
}

// record counts one finished request. A bucket is reused only an hour
// after its minute, so the lock is taken once a minute, not per request.
func (w *window) record(now time.Time, outcome string, coalesced, called bool) {
	b := w.current(now)
	b.requests.Add(1)
	if outcome != flow.OutcomeBypass {
		b.eligible.Add(1)
	}
	switch outcome {
	case flow.OutcomeHitExact, flow.OutcomeHitSemantic, flow.OutcomeStale:
		b.hits.Add(1)
		b.saved.Add(1)
	}
	if coalesced {
		b.saved.Add(1)
	}
	if called {
		b.calls.Add(1)
	}
}

// recordTokens adds the tokens one request saved, and their cost, to the
// current minute.
func (w *window) recordTokens(now time.Time, u flow.Usage, nano uint64) {
	b := w.current(now)
	b.savedIn.Add(u.Input)
	b.savedOut.Add(u.Output)
	b.savedNano.Add(nano)
}

// recordJudge adds the tokens one judge call spent, and their cost, to the
// current minute.
func (w *window) recordJudge(now time.Time, u flow.Usage, nano uint64) {
	b := w.current(now)
	b.judgeIn.Add(u.Input)
	b.judgeOut.Add(u.Output)
	b.judgeNano.Add(nano)
}

// current is the bucket of now's minute.
func (w *window) current(now time.Time) *bucket {
	b := &w.buckets[now.Unix()/60%60]
	if b.minute.Load() != now.Unix()/60 {
		w.mu.Lock()
		b = w.bucketLocked(now)
		w.mu.Unlock()
	}
	return b
}

// sampleTargets folds the growth of the caller's per-target counters since
// the last sample into the current minute and hour of day.
func (w *window) sampleTargets(now time.Time, cum map[string]TargetCum) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.bucketLocked(now)
	for name, c := range cum {
		last := w.lastTgts[name]
		if c.Sent < last.Sent || c.RateLimited < last.RateLimited || c.Capacity < last.Capacity {
			last = TargetCum{}
		}
		if d := c.RateLimited - last.RateLimited; d > 0 {
			if b.rateLimited == nil {
				b.rateLimited = map[string]uint64{}
			}
			b.rateLimited[name] += d
		}
		if d := c.Sent - last.Sent; d > 0 {
			if b.sent == nil {
				b.sent = map[string]uint64{}
			}
			b.sent[name] += d
		}
		w.byHour[now.UTC().Hour()] += c.Capacity - last.Capacity
		w.lastTgts[name] = c
	}
}

// WindowStats are the figures of one rolling window.
type WindowStats struct {
	Requests      uint64             `json:"requests"`
	HitRate       float64            `json:"hit_rate"`
	UpstreamCalls uint64             `json:"upstream_calls"`
	Saved         uint64             `json:"saved"`
	RateLimited   map[string]float64 `json:"rate_limited_ratio"` // 429s / attempts, by target
}

// TimelinePoint is one minute of the last hour; /stats lists only the
// minutes that had requests.
type TimelinePoint struct {
	Minute   int64   `json:"minute"` // unix seconds at the minute's start
	Requests uint64  `json:"requests"`
	HitRate  float64 `json:"hit_rate"`
	Saved    uint64  `json:"saved"`
	// TokensSaved and CostSavedUSD are what the minute's hits, stale
	// answers and coalesced followers kept from the models (cost: 0
	// without prices).
	TokensSaved  TokenCount `json:"tokens_saved"`
	CostSavedUSD float64    `json:"cost_saved_usd"`
	// TokensVerification and CostVerificationUSD are what the minute's
	// judge calls spent checking semantic candidates.
	TokensVerification  TokenCount `json:"tokens_verification"`
	CostVerificationUSD float64    `json:"cost_verification_usd"`
}

func (w *window) summary(now time.Time, span time.Duration) WindowStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := now.Unix() / 60
	n := int64(span / time.Minute)
	var ws WindowStats
	var eligible, hits uint64
	sent := map[string]uint64{}
	rl := map[string]uint64{}
	for i := int64(0); i < n && i < 60; i++ {
		b := &w.buckets[(cur-i)%60]
		if b.minute.Load() != cur-i {
			continue
		}
		ws.Requests += b.requests.Load()
		ws.UpstreamCalls += b.calls.Load()
		ws.Saved += b.saved.Load()
		eligible += b.eligible.Load()
		hits += b.hits.Load()
		for k, v := range b.sent {
			sent[k] += v
		}
		for k, v := range b.rateLimited {
			rl[k] += v
		}
	}
	if eligible > 0 {
		ws.HitRate = ratio(hits, eligible)
	}
	ws.RateLimited = map[string]float64{}
	for k, s := range sent {
		if s > 0 {
			ws.RateLimited[k] = ratio(rl[k], s)
		}
	}
	return ws
}

// timeline returns the minutes of the last hour that had requests, oldest
// first: a quiet sidecar's /stats is not sixty empty buckets (readers place
// points by their minute).
func (w *window) timeline(now time.Time) []TimelinePoint {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := now.Unix() / 60
	out := []TimelinePoint{}
	for i := int64(59); i >= 0; i-- {
		m := cur - i
		b := &w.buckets[m%60]
		if b.minute.Load() != m || b.requests.Load() == 0 {
			continue
		}
		p := TimelinePoint{Minute: m * 60, Requests: b.requests.Load(), Saved: b.saved.Load()}
		p.TokensSaved = TokenCount{Input: b.savedIn.Load(), Output: b.savedOut.Load()}
		p.CostSavedUSD = float64(b.savedNano.Load()) / 1e9
		p.TokensVerification = TokenCount{Input: b.judgeIn.Load(), Output: b.judgeOut.Load()}
		p.CostVerificationUSD = float64(b.judgeNano.Load()) / 1e9
		if e := b.eligible.Load(); e > 0 {
			p.HitRate = ratio(b.hits.Load(), e)
		}
		out = append(out, p)
	}
	return out
}

// ratio is n/d rounded to four decimals (0.3636, not 0.36363636363636365):
// /stats rates are read by people and dashboards, not summed.
func ratio(n, d uint64) float64 {
	return math.Round(float64(n)/float64(d)*1e4) / 1e4
}

func (w *window) capacityByHour() [24]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byHour
}
