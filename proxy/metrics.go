package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the proxy's Prometheus metrics. Build them with NewMetrics
// from the registry main owns; there are no globals.
type Metrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	overhead   prometheus.Histogram
	similarity prometheus.Histogram
	coalesced  prometheus.Counter
	limits     *prometheus.CounterVec
	knownIDs   prometheus.Gauge
	tokens     *prometheus.CounterVec
}

// NewMetrics registers the proxy's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_requests_total",
			Help: "Requests by endpoint and cache outcome (hit-exact, hit-semantic, miss, bypass, stale).",
		}, []string{"endpoint", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "breakwater_request_duration_seconds",
			Help:    "Time from request received to response written, by cache outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"outcome"}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "breakwater_overhead_seconds",
			Help:    "Time Breakwater itself added to a request: total duration minus time waiting for the upstream.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}),
		similarity: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "breakwater_cache_similarity",
			Help:    "Cosine similarity of served semantic and stale hits.",
			Buckets: []float64{.80, .85, .88, .90, .91, .92, .93, .94, .95, .96, .97, .98, .99, 1},
		}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "breakwater_coalesced_total",
			Help: "Requests answered by another identical request's upstream call (singleflight).",
		}),
		limits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_limits_reached_total",
			Help: "Requests that reached a resource bound, by the setting that bounds it.",
		}, []string{"limit"}),
		knownIDs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "breakwater_responses_known_ids",
			Help: "Responses ids whose creating upstream this process remembers (bounded by DefaultResponseOwners).",
		}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_tokens_total",
			Help: "Tokens of answers by the model that produced them, direction (input, output) and outcome: hit-exact, hit-semantic, stale and coalesced reused the answer (saved), miss and bypass paid for it (spent).",
		}, []string{"model", "direction", "outcome"}),
	}
	reg.MustRegister(m.requests, m.duration, m.overhead, m.similarity, m.coalesced, m.limits, m.knownIDs, m.tokens)
	return m
}

// limitReached counts a request that reached the bound named by the setting
// limit; nil-safe.
func (m *Metrics) limitReached(limit string) {
	if m != nil {
		m.limits.WithLabelValues(limit).Inc()
	}
}

func (m *Metrics) observe(endpoint, outcome string, total, upstream time.Duration, similarity float32) {
	m.requests.WithLabelValues(endpoint, outcome).Inc()
	m.duration.WithLabelValues(outcome).Observe(total.Seconds())
	if o := total - upstream; o >= 0 {
		m.overhead.Observe(o.Seconds())
	}
	if similarity > 0 && (outcome == OutcomeHitSemantic || outcome == OutcomeStale) {
		m.similarity.Observe(float64(similarity))
	}
}

// knownIDsGauge is the gauge of the Responses owner registry; nil without
// metrics.
func (m *Metrics) knownIDsGauge() prometheus.Gauge {
	if m == nil {
		return nil
	}
	return m.knownIDs
}
