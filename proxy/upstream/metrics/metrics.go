// Package metrics holds the upstream caller's Prometheus collectors.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/lib/metric"
)

// Metrics are the caller's Prometheus collectors. Label values are configuration
// names only (target, upstream, pool) and fixed words (outcome, reason), so
// cardinality is bounded by the config. A nil *Metrics records nothing.
type Metrics struct {
	Attempts *prometheus.CounterVec
	Duration *prometheus.HistogramVec
	Inflight *prometheus.GaugeVec
	Queued   *prometheus.GaugeVec
	Breaker  *prometheus.GaugeVec
	Weight   *prometheus.GaugeVec
	Retries  *prometheus.CounterVec
	Limits   *prometheus.GaugeVec
	Sheds    *prometheus.CounterVec
	Waits    *prometheus.HistogramVec
	Budget   *prometheus.CounterVec
	Pace     *prometheus.GaugeVec
	Nobody   *prometheus.CounterVec
	Refusals *prometheus.CounterVec
}

// New builds the collectors and registers them with reg (nil: not
// registered); it panics, like prometheus.MustRegister, when they are already
// registered.
//
//	breakwater_upstream_attempts_total{target,outcome}     outcome: success, rate_limited, server_error, timeout, client_error, shed, conn_error
//	breakwater_upstream_attempt_duration_seconds{target}   histogram of answered attempts
//	breakwater_upstream_inflight{upstream}                 attempts in flight
//	breakwater_upstream_queued{upstream,pool}              requests waiting for a slot
//	breakwater_upstream_breaker_state{target}              0 closed, 1 half-open, 2 open
//	breakwater_upstream_weight{target}                     current dynamic weight
//	breakwater_upstream_retries_total{target,reason}       retries by reason (rate_limited, server_error, timeout, conn_refused, conn_reset, conn_error)
//	breakwater_upstream_limit{target}                      adaptive concurrency limit (summed over the target's lanes)
//	breakwater_upstream_shed_total{target,reason}          requests refused before the upstream, by reason
//	breakwater_upstream_refusals_total{target,limit}       upstream congestion refusals by the limit they hit: requests, tokens, input_tokens, output_tokens, concurrency
//	breakwater_upstream_queue_wait_seconds{target}         time granted requests waited for a slot
//	breakwater_upstream_retry_budget_total{target,result}  retries of refusals: sent (within the budget), waited (found it spent) or lone (a lone lane's, outside it)
//	breakwater_upstream_pace_rate{target}                  sends per second of lanes below one slot (0: none paced)
//	breakwater_upstream_abandoned_total{target}            attempts whose client had gone before the answer (made for nobody)
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Attempts: metric.CounterVec("breakwater_upstream_attempts_total",
			"Upstream attempts by target and outcome (shed: refused by a full queue, never sent).", "target", "outcome"),
		Duration: metric.HistogramVec("breakwater_upstream_attempt_duration_seconds",
			"Duration of answered upstream attempts (full body for non-streaming, headers for streaming).",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}, "target"),
		Inflight: metric.GaugeVec("breakwater_upstream_inflight",
			"Upstream attempts in flight.", "upstream"),
		Queued: metric.GaugeVec("breakwater_upstream_queued",
			"Requests waiting for an upstream slot, by pool.", "upstream", "pool"),
		Breaker: metric.GaugeVec("breakwater_upstream_breaker_state",
			"Circuit breaker state per target: 0 closed, 1 half-open, 2 open.", "target"),
		Weight: metric.GaugeVec("breakwater_upstream_weight",
			"Current dynamic weight per target (configured weight times health factor).", "target"),
		Retries: metric.CounterVec("breakwater_upstream_retries_total",
			"Retries of the same target by reason.", "target", "reason"),
		Limits: metric.GaugeVec("breakwater_upstream_limit",
			"Adaptive concurrency limit per target, summed over its lanes (one per forwarded key).", "target"),
		Sheds: metric.CounterVec("breakwater_upstream_shed_total",
			"Requests refused before reaching the upstream, by reason (queue_full, wait_beyond_deadline, queue_timeout, rate_limited, breaker_open).", "target", "reason"),
		Waits: metric.HistogramVec("breakwater_upstream_queue_wait_seconds",
			"Time requests waited in a target's queue before their attempt was sent.",
			[]float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "target"),
		Budget: metric.CounterVec("breakwater_upstream_retry_budget_total",
			"Retries of congestion refusals by target: sent within the retry budget, or waited (the budget was spent).", "target", "result"),
		Pace: metric.GaugeVec("breakwater_upstream_pace_rate",
			"Sends per second of a target's lanes whose adaptive limit is below one slot (0 when none is).", "target"),
		Nobody: metric.CounterVec("breakwater_upstream_abandoned_total",
			"Upstream attempts whose client had gone before the answer: answers the provider made (and bills) for nobody.", "target"),
		Refusals: metric.CounterVec("breakwater_upstream_refusals_total",
			"Upstream congestion refusals by target and the limit they hit (requests, tokens, input_tokens, output_tokens, concurrency).", "target", "limit"),
	}
	if reg != nil {
		reg.MustRegister(m.Attempts, m.Duration, m.Inflight, m.Queued, m.Breaker, m.Weight, m.Retries, m.Limits, m.Sheds, m.Waits,
			m.Budget, m.Pace, m.Nobody, m.Refusals)
	}
	return m
}

// Attempt counts an attempt's outcome and, d > 0, observes its duration.
func (m *Metrics) Attempt(target, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.Attempts.WithLabelValues(target, outcome).Inc()
	if d > 0 {
		m.Duration.WithLabelValues(target).Observe(d.Seconds())
	}
}

// Retry counts a retry by reason.
func (m *Metrics) Retry(target, reason string) {
	if m == nil {
		return
	}
	m.Retries.WithLabelValues(target, reason).Inc()
}

// QueuedSet sets the requests waiting in a pool.
func (m *Metrics) QueuedSet(upstream, pool string, n int) {
	if m == nil {
		return
	}
	m.Queued.WithLabelValues(upstream, pool).Set(float64(n))
}

// Health sets a target's breaker state (0 closed, 1 half-open, 2 open) and weight.
func (m *Metrics) Health(target string, state int, weight float64) {
	if m == nil {
		return
	}
	m.Breaker.WithLabelValues(target).Set(float64(state))
	m.Weight.WithLabelValues(target).Set(weight)
}

// Limit sets a target's adaptive concurrency limit.
func (m *Metrics) Limit(target string, v float64) {
	if m == nil {
		return
	}
	m.Limits.WithLabelValues(target).Set(v)
}

// Refused counts an upstream refusal by the limit it hit.
func (m *Metrics) Refused(target, limit string) {
	if m == nil {
		return
	}
	m.Refusals.WithLabelValues(target, limit).Inc()
}

// Shed counts a request refused before the upstream.
func (m *Metrics) Shed(target, reason string) {
	if m == nil {
		return
	}
	m.Sheds.WithLabelValues(target, reason).Inc()
}

// QueueWait observes how long a granted request waited.
func (m *Metrics) QueueWait(target string, d time.Duration) {
	if m == nil {
		return
	}
	m.Waits.WithLabelValues(target).Observe(d.Seconds())
}

// RetryBudget counts a retry of a refusal by result.
func (m *Metrics) RetryBudget(target, result string) {
	if m == nil {
		return
	}
	m.Budget.WithLabelValues(target, result).Inc()
}

// PaceRate sets a paced target's sends per second.
func (m *Metrics) PaceRate(target string, v float64) {
	if m == nil {
		return
	}
	m.Pace.WithLabelValues(target).Set(v)
}

// Abandoned counts an attempt made for a client already gone.
func (m *Metrics) Abandoned(target string) {
	if m == nil {
		return
	}
	m.Nobody.WithLabelValues(target).Inc()
}
