// Package observe subscribes to the flow's finished requests (flow.Record)
// and upstream calls (flow.Hooks): the token accounting by model and
// tenant, the rolling windows of /stats and the dashboard, and the
// Prometheus metrics. The HTTP adapter (package proxy) hands each Record to
// an Observer, with its own /stats counters, the access log and the trace.
package observe

import (
	"time"

	"github.com/breakwater-dev/breakwater/proxy/flow"
)

// Observer turns the flow's Records and hooks into tokens, windows and
// metrics. Metrics may be nil (none).
type Observer struct {
	now     func() time.Time
	tokens  *tokenBook
	window  *window
	metrics *Metrics
}

// New builds an Observer pricing tokens by prices (nil: tokens alone) and
// recording metrics in m (nil: none), on the clock now.
func New(prices map[string]Price, m *Metrics, now func() time.Time) *Observer {
	return &Observer{now: now, tokens: newTokenBook(prices, m), window: newWindow(), metrics: m}
}

// Usage is the token counts of one answer (wire.Usage).
type Usage = flow.Usage

// Finished records one finished request: its tokens, its minute in the
// windows, its metrics.
func (o *Observer) Finished(r *flow.Record) {
	o.window.record(r.End, r.Outcome, r.Coalesced, r.Called)
	o.countTokens(r)
	if o.metrics != nil {
		o.metrics.finished(r)
	}
}

// Answered records a request answered outside the flow (a pass-through, an
// error before the lookup): a bypass, in the windows.
func (o *Observer) Answered(now time.Time) {
	o.window.record(now, flow.OutcomeBypass, false, false)
}

// Hooks are the flow's hooks that feed o.
func (o *Observer) Hooks() flow.Hooks {
	h := flow.Hooks{
		Judge: func(model, partition string, u flow.Usage) {
			nano := o.tokens.count(model, partition, OutcomeJudge, useVerify, u)
			o.window.recordJudge(o.now(), u, nano)
		},
	}
	if m := o.metrics; m != nil {
		h.Call = func(f flow.Format, model string, d time.Duration, errType string, u flow.Usage) {
			m.genAICall(f, o.tokens.modelLabel(model), d, errType, u)
		}
		h.FirstChunk = func(f flow.Format, model string, d time.Duration) {
			m.genAIFirstChunk(f, o.tokens.modelLabel(model), d)
		}
		h.Limit = m.LimitReached
		h.KnownIDs = m.knownIDsGauge()
	}
	return h
}

// Tokens is the "tokens" section of /stats.
func (o *Observer) Tokens() TokenStats { return o.tokens.snapshot() }

// SampleTargets folds the caller's per-target counters into the windows.
func (o *Observer) SampleTargets(now time.Time, cum map[string]TargetCum) {
	o.window.sampleTargets(now, cum)
}

// Windows are the rolling figures over the last "1m", "15m" and "1h".
func (o *Observer) Windows(now time.Time) map[string]WindowStats {
	return map[string]WindowStats{
		"1m":  o.window.summary(now, time.Minute),
		"15m": o.window.summary(now, 15*time.Minute),
		"1h":  o.window.summary(now, time.Hour),
	}
}

// Timeline is the last hour, one point per minute that had requests.
func (o *Observer) Timeline(now time.Time) []TimelinePoint { return o.window.timeline(now) }

// CapacityByHour counts at-capacity answers by UTC hour of day.
func (o *Observer) CapacityByHour() [24]uint64 { return o.window.capacityByHour() }

// Ratio is n/d rounded as /stats shows rates.
func Ratio(n, d uint64) float64 { return ratio(n, d) }
