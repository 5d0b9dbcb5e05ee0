package verify

import "github.com/prometheus/client_golang/prometheus"

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
		calls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "breakwater_verify_judge_calls_total", Help: "Calls to the semantic-hit judge.",
		}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_verify_verdicts_total", Help: "Judge verdicts on semantic candidates, by verdict (accept, reject).",
		}, []string{"verdict"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_verify_fallbacks_total", Help: "Lookups decided by the static threshold because the judge was busy, slow or failing, by reason.",
		}, []string{"reason"}),
		cached: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "breakwater_verify_cached_verdicts_total", Help: "Judge verdicts reused from the verdict cache.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "breakwater_verify_judge_seconds", Help: "Duration of judge calls.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		samples: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_verify_samples_total", Help: "Would-be semantic hits answered fresh to measure the false-hit rate, by result (match, mismatch).",
		}, []string{"result"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_verify_samples_skipped_total", Help: "Samples of semantic hits not taken, by reason (busy: the target was queueing, rate limited or its breaker not closed).",
		}, []string{"reason"}),
		near: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "breakwater_verify_near_misses_total", Help: "Misses with a near candidate, by whether the fresh answer matched the candidate's (matched, differed).",
		}, []string{"result"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "breakwater_verify_false_hit_rate", Help: "Estimated share of served semantic hits that are wrong, with its 95 % Wilson interval (bound: estimate, low, high).",
		}, []string{"bound"}),
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
