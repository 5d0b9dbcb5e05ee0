package verify

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/lib/metric"
)

// Metrics are the judge's and the live estimate's Prometheus metrics.
type Metrics struct {
	calls     prometheus.Counter
	verdicts  *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
	cached    prometheus.Counter
	latency   prometheus.Histogram
	samples   *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	near      *prometheus.CounterVec
	rate      *prometheus.GaugeVec
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: metric.Counter("breakwater_verify_judge_calls_total",
			"Calls to the semantic-hit judge."),
		verdicts: metric.CounterVec("breakwater_verify_verdicts_total",
			"Judge verdicts on semantic candidates, by verdict (accept, reject).", "verdict"),
		fallbacks: metric.CounterVec("breakwater_verify_fallbacks_total",
			"Lookups decided by the static threshold because the judge was busy, slow or failing, by reason.", "reason"),
		cached: metric.Counter("breakwater_verify_cached_verdicts_total",
			"Judge verdicts reused from the verdict cache."),
		latency: metric.Histogram("breakwater_verify_judge_seconds",
			"Duration of judge calls.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5}),
		samples: metric.CounterVec("breakwater_verify_samples_total",
			"Would-be semantic hits answered fresh to measure the false-hit rate, by result (match, mismatch).", "result"),
		skipped: metric.CounterVec("breakwater_verify_samples_skipped_total",
			"Samples of semantic hits not taken, by reason (busy: the target was queueing, rate limited or its breaker not closed).", "reason"),
		near: metric.CounterVec("breakwater_verify_near_misses_total",
			"Misses with a near candidate, by whether the fresh answer matched the candidate's (matched, differed).", "result"),
		rate: metric.GaugeVec("breakwater_verify_false_hit_rate",
			"Estimated share of served semantic hits that are wrong, with its 95 % Wilson interval (bound: estimate, low, high).", "bound"),
	}
	reg.MustRegister(m.calls, m.verdicts, m.fallbacks, m.cached, m.latency, m.samples, m.skipped, m.near, m.rate)
	return m
}

func (m *Metrics) verdict(accept bool) {
	if accept {
		m.verdicts.WithLabelValues("accept").Inc()
	} else {
		m.verdicts.WithLabelValues("reject").Inc()
	}
}
