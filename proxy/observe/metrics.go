package observe

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/lib/metric"
	"github.com/breakwater-dev/breakwater/proxy/flow"
)

// Metrics are the proxy's Prometheus metrics. Build them with NewMetrics
// from the registry main owns; there are no globals.
type Metrics struct {
	Requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	overhead   prometheus.Histogram
	similarity prometheus.Histogram
	coalesced  prometheus.Counter
	Limits     *prometheus.CounterVec
	knownIDs   prometheus.Gauge
	Tokens     *prometheus.CounterVec
	Cost       *prometheus.CounterVec
	// The GenAI client metrics of the OpenTelemetry semantic conventions
	// (gen_ai.client.token.usage, gen_ai.client.operation.duration,
	// gen_ai.client.operation.time_to_first_chunk), in Prometheus form, for
	// each upstream call a request led.
	genTokens   *prometheus.HistogramVec
	genDuration *prometheus.HistogramVec
	genFirst    *prometheus.HistogramVec
}

// NewMetrics registers the proxy's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: metric.CounterVec("breakwater_requests_total",
			"Requests by endpoint and cache outcome (hit-exact, hit-semantic, miss, bypass, stale).", "endpoint", "outcome"),
		duration: metric.HistogramVec("breakwater_request_duration_seconds",
			"Time from request received to response written, by cache outcome.",
			[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "outcome"),
		overhead: metric.Histogram("breakwater_overhead_seconds",
			"Time Breakwater itself added to a request: total duration minus time waiting for the upstream.",
			[]float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1}),
		similarity: metric.Histogram("breakwater_cache_similarity",
			"Cosine similarity of served semantic and stale hits.",
			[]float64{.80, .85, .88, .90, .91, .92, .93, .94, .95, .96, .97, .98, .99, 1}),
		coalesced: metric.Counter("breakwater_coalesced_total",
			"Requests answered by another identical request's upstream call (singleflight)."),
		Limits: metric.CounterVec("breakwater_limits_reached_total",
			"Requests that reached a resource bound, by the setting that bounds it.", "limit"),
		knownIDs: metric.Gauge("breakwater_responses_known_ids",
			"Responses ids whose creating upstream this process remembers (bounded by DefaultResponseOwners)."),
		Tokens: metric.CounterVec("breakwater_tokens_total",
			"Tokens of answers by the model that produced them, direction (input, output) and outcome: hit-exact, hit-semantic, stale and coalesced reused the answer (saved), miss and bypass paid for it (spent), judge the auto judge spent verifying semantic candidates (savings net of verification: saved less judge).", "model", "direction", "outcome"),
		Cost: metric.CounterVec("breakwater_cost_usd_total",
			"Cost in USD of the tokens of breakwater_tokens_total at the configured prices, by kind: saved, spent, verification (the auto judge's calls; savings net of verification: saved less verification).", "kind"),
	}
	genLabels := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}
	// Bucket boundaries as the conventions advise for each instrument.
	m.genTokens = metric.HistogramVec("gen_ai_client_token_usage",
		"Tokens used per upstream call (GenAI semantic conventions), by token type (input, output).",
		[]float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}, append(genLabels, "gen_ai_token_type")...)
	m.genDuration = metric.HistogramVec("gen_ai_client_operation_duration_seconds",
		"Duration of upstream calls, retries and fallbacks included (GenAI semantic conventions); error_type is empty on success.",
		[]float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}, append(genLabels, "error_type")...)
	m.genFirst = metric.HistogramVec("gen_ai_client_operation_time_to_first_chunk_seconds",
		"Time from an upstream stream call to its first chunk (GenAI semantic conventions).",
		[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}, genLabels...)
	reg.MustRegister(m.Requests, m.duration, m.overhead, m.similarity, m.coalesced, m.Limits, m.knownIDs, m.Tokens, m.Cost,
		m.genTokens, m.genDuration, m.genFirst)
	return m
}

// LimitReached counts a request that reached the bound named by the
// setting limit; nil-safe.
func (m *Metrics) LimitReached(limit string) {
	if m != nil {
		m.Limits.WithLabelValues(limit).Inc()
	}
}

// finished records one finished request.
func (m *Metrics) finished(r *flow.Record) {
	endpoint, outcome, total, upstream, similarity := r.Endpoint, r.Outcome, r.End.Sub(r.Start), r.Upstream, r.Similarity
	if r.Coalesced {
		m.coalesced.Inc()
	}
	m.Requests.WithLabelValues(endpoint, outcome).Inc()
	m.duration.WithLabelValues(outcome).Observe(total.Seconds())
	if o := total - upstream; o >= 0 {
		m.overhead.Observe(o.Seconds())
	}
	if similarity > 0 && (outcome == flow.OutcomeHitSemantic || outcome == flow.OutcomeStale) {
		m.similarity.Observe(float64(similarity))
	}
}

// knownIDsGauge sets the gauge of the Responses owner registry; nil
// without metrics.
func (m *Metrics) knownIDsGauge() func(n int) {
	if m == nil {
		return nil
	}
	return func(n int) { m.knownIDs.Set(float64(n)) }
}

// genAICall records one upstream call of format f for model: its duration
// (errType "" on success) and, when known, its usage. nil-safe.
func (m *Metrics) genAICall(f flow.Format, model string, d time.Duration, errType string, u flow.Usage) {
	if m == nil {
		return
	}
	op, provider := flow.GenAIOf(f)
	m.genDuration.WithLabelValues(op, provider, model, errType).Observe(d.Seconds())
	if u.Known {
		m.genTokens.WithLabelValues(op, provider, model, "input").Observe(float64(u.Input))
		m.genTokens.WithLabelValues(op, provider, model, "output").Observe(float64(u.Output))
	}
}

// genAIFirstChunk records a stream's time to its first chunk. nil-safe.
func (m *Metrics) genAIFirstChunk(f flow.Format, model string, d time.Duration) {
	if m == nil {
		return
	}
	op, provider := flow.GenAIOf(f)
	m.genFirst.WithLabelValues(op, provider, model).Observe(d.Seconds())
}
