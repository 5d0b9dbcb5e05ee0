package upstream

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the caller's Prometheus collectors. Label values are configuration
// names only (target, upstream, pool) and fixed words (outcome, reason), so
// cardinality is bounded by the config. A nil *Metrics records nothing.
type Metrics struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
	queued   *prometheus.GaugeVec
	breaker  *prometheus.GaugeVec
	weight   *prometheus.GaugeVec
	retries  *prometheus.CounterVec
	limits   *prometheus.GaugeVec
	sheds    *prometheus.CounterVec
	waits    *prometheus.HistogramVec
	budget   *prometheus.CounterVec
	pace     *prometheus.GaugeVec
	nobody   *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

// NewMetrics builds the collectors and registers them with reg (nil: not
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
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_upstream_attempts_total",
			Help: "Upstream attempts by target and outcome (shed: refused by a full queue, never sent).",
		}, []string{"target", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "breakwater_upstream_attempt_duration_seconds",
			Help:    "Duration of answered upstream attempts (full body for non-streaming, headers for streaming).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"target"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "breakwater_upstream_inflight",
			Help: "Upstream attempts in flight.",
		}, []string{"upstream"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "breakwater_upstream_queued",
			Help: "Requests waiting for an upstream slot, by pool.",
		}, []string{"upstream", "pool"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "breakwater_upstream_breaker_state",
			Help: "Circuit breaker state per target: 0 closed, 1 half-open, 2 open.",
		}, []string{"target"}),
		weight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "breakwater_upstream_weight",
			Help: "Current dynamic weight per target (configured weight times health factor).",
		}, []string{"target"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_upstream_retries_total",
			Help: "Retries of the same target by reason.",
		}, []string{"target", "reason"}),
		limits: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "breakwater_upstream_limit",
			Help: "Adaptive concurrency limit per target, summed over its lanes (one per forwarded key).",
		}, []string{"target"}),
		sheds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_upstream_shed_total",
			Help: "Requests refused before reaching the upstream, by reason (queue_full, wait_beyond_deadline, queue_timeout, rate_limited, breaker_open).",
		}, []string{"target", "reason"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "breakwater_upstream_queue_wait_seconds",
			Help:    "Time requests waited in a target's queue before their attempt was sent.",
			Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"target"}),
		budget: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_upstream_retry_budget_total",
			Help: "Retries of congestion refusals by target: sent within the retry budget, or waited (the budget was spent).",
		}, []string{"target", "result"}),
		pace: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "breakwater_upstream_pace_rate",
			Help: "Sends per second of a target's lanes whose adaptive limit is below one slot (0 when none is).",
		}, []string{"target"}),
		nobody: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_upstream_abandoned_total",
			Help: "Upstream attempts whose client had gone before the answer: answers the provider made (and bills) for nobody.",
		}, []string{"target"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_upstream_refusals_total",
			Help: "Upstream congestion refusals by target and the limit they hit (requests, tokens, input_tokens, output_tokens, concurrency).",
		}, []string{"target", "limit"}),
	}
	if reg != nil {
		reg.MustRegister(m.attempts, m.duration, m.inflight, m.queued, m.breaker, m.weight, m.retries, m.limits, m.sheds, m.waits,
			m.budget, m.pace, m.nobody, m.refusals)
	}
	return m
}

func (m *Metrics) attempt(target string, o outcome, d time.Duration) {
	if m == nil || o == outCanceled {
		return
	}
	m.attempts.WithLabelValues(target, o.String()).Inc()
	if o != outShed && d > 0 {
		m.duration.WithLabelValues(target).Observe(d.Seconds())
	}
}

func (m *Metrics) retry(target, reason string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(target, reason).Inc()
}

func (m *Metrics) queuedSet(upstream, pool string, n int) {
	if m == nil {
		return
	}
	m.queued.WithLabelValues(upstream, pool).Set(float64(n))
}

func (m *Metrics) health(target string, s State, weight float64) {
	if m == nil {
		return
	}
	m.breaker.WithLabelValues(target).Set(float64(s))
	m.weight.WithLabelValues(target).Set(weight)
}

func (m *Metrics) limit(target string, v float64) {
	if m == nil {
		return
	}
	m.limits.WithLabelValues(target).Set(v)
}

func (m *Metrics) refused(target, limit string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(target, limit).Inc()
}

func (m *Metrics) shed(target, reason string) {
	if m == nil {
		return
	}
	m.sheds.WithLabelValues(target, reason).Inc()
}

func (m *Metrics) queueWait(target string, d time.Duration) {
	if m == nil {
		return
	}
	m.waits.WithLabelValues(target).Observe(d.Seconds())
}

func (m *Metrics) retryBudget(target, result string) {
	if m == nil {
		return
	}
	m.budget.WithLabelValues(target, result).Inc()
}

func (m *Metrics) paceRate(target string, v float64) {
	if m == nil {
		return
	}
	m.pace.WithLabelValues(target).Set(v)
}

func (m *Metrics) abandoned(target string) {
	if m == nil {
		return
	}
	m.nobody.WithLabelValues(target).Inc()
}
