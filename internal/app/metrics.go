package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/embed"
	"github.com/breakwater-dev/breakwater/lib/metric"
)

// cacheMetrics are the cache tiers' Prometheus metrics: latency histograms
// measured by wrapping the embedder and the index, and gauges/counters read
// from cache.Stats at scrape time.
type cacheMetrics struct {
	embedSeconds *prometheus.HistogramVec
	indexSeconds *prometheus.HistogramVec
}

func newCacheMetrics(reg prometheus.Registerer) *cacheMetrics {
	m := &cacheMetrics{
		embedSeconds: metric.HistogramVec("breakwater_embed_duration_seconds",
			"Time to embed a batch of texts, by result (ok, error).",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}, "result"),
		indexSeconds: metric.HistogramVec("breakwater_index_duration_seconds",
			"Time of vector index calls, by operation (search, upsert, get) and result (ok, error).",
			[]float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .5}, "op", "result"),
	}
	reg.MustRegister(m.embedSeconds, m.indexSeconds)
	return m
}

// registerCacheStats exports cache.Stats as metrics read at scrape time, so
// the cache package needs no Prometheus dependency of its own.
func registerCacheStats(reg prometheus.Registerer, c *cache.Cache) {
	stats := func() cache.Stats {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Stats(ctx)
	}
	reg.MustRegister(&statsCollector{stats: stats})
}

type statsCollector struct {
	stats func() cache.Stats
}

var (
	descEntries = prometheus.NewDesc("breakwater_cache_entries", "Entries in a cache tier (tier: exact, semantic); -1 when the index cannot be counted.", []string{"tier"}, nil)
	descQueue   = prometheus.NewDesc("breakwater_writeback_queue_depth", "Index writes waiting in the asynchronous write-back queue.", nil, nil)
	descDrops   = prometheus.NewDesc("breakwater_writeback_dropped_total", "Index writes dropped because the write-back queue was full or closing.", nil, nil)
	descWFail   = prometheus.NewDesc("breakwater_writeback_failures_total", "Index writes lost to embedder or index errors.", nil, nil)
	descGuard   = prometheus.NewDesc("breakwater_guard_rejections_total", "Semantic candidates above the threshold rejected by the guard, by reason.", []string{"reason"}, nil)
	descLong    = prometheus.NewDesc("breakwater_longtext_rejections_total", "Semantic candidates rejected because the encoder cannot see all of the candidate text or it is much longer than the query.", nil, nil)
	descPromo   = prometheus.NewDesc("breakwater_cache_promotions_total", "Verified semantic hits copied into the exact tier once served.", nil, nil)
	descXUser   = prometheus.NewDesc("breakwater_cache_cross_user_refusals_total", "Semantic candidates not served because another end user created them (cache.semantic.cross_user).", nil, nil)
	descAgreed  = prometheus.NewDesc("breakwater_cache_agreements_total", "Answers stored as agreed: a second end user's fresh answer matched another user's refused candidate.", nil, nil)
	descIxState = prometheus.NewDesc("breakwater_index_state", "1 for the vector index's current state (state: opening, ready, failed, off), 0 for the others.", []string{"state"}, nil)
	descIxOpen  = prometheus.NewDesc("breakwater_index_open_seconds", "How long the vector index took to open (so far, while opening).", nil, nil)
	descErrs    = prometheus.NewDesc("breakwater_cache_component_errors_total", "Errors of the semantic tier's components (component: embedder, index reads and flushes, index_writes).", []string{"component"}, nil)
)

func (s *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEntries, descQueue, descDrops, descWFail, descGuard, descLong, descPromo, descXUser, descAgreed, descErrs, descIxState, descIxOpen} {
		ch <- d
	}
}

func (s *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := s.stats()
	ch <- prometheus.MustNewConstMetric(descEntries, prometheus.GaugeValue, float64(st.ExactEntries), "exact")
	ch <- prometheus.MustNewConstMetric(descEntries, prometheus.GaugeValue, float64(st.IndexEntries), "semantic")
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(st.QueueDepth))
	ch <- prometheus.MustNewConstMetric(descDrops, prometheus.CounterValue, float64(st.QueueDrops))
	ch <- prometheus.MustNewConstMetric(descWFail, prometheus.CounterValue, float64(st.WriteFailures))
	ch <- prometheus.MustNewConstMetric(descLong, prometheus.CounterValue, float64(st.LongTextRejections))
	ch <- prometheus.MustNewConstMetric(descPromo, prometheus.CounterValue, float64(st.Promotions))
	ch <- prometheus.MustNewConstMetric(descXUser, prometheus.CounterValue, float64(st.CrossUserRefusals))
	ch <- prometheus.MustNewConstMetric(descAgreed, prometheus.CounterValue, float64(st.Agreements))
	ch <- prometheus.MustNewConstMetric(descErrs, prometheus.CounterValue, float64(st.EmbedErrors), "embedder")
	ch <- prometheus.MustNewConstMetric(descErrs, prometheus.CounterValue, float64(st.IndexErrors), "index")
	ch <- prometheus.MustNewConstMetric(descErrs, prometheus.CounterValue, float64(st.IndexWriteErrors), "index_writes")
	for _, state := range [...]string{cache.IndexOpening, cache.IndexReady, cache.IndexFailed, cache.IndexOff} {
		v := 0.0
		if st.IndexState == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descIxState, prometheus.GaugeValue, v, state)
	}
	ch <- prometheus.MustNewConstMetric(descIxOpen, prometheus.GaugeValue, st.IndexOpenSeconds)
	for reason, n := range st.GuardRejections {
		ch <- prometheus.MustNewConstMetric(descGuard, prometheus.CounterValue, float64(n), reason)
	}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// timedEmbedder measures every Embed call.
type timedEmbedder struct {
	embed.Embedder
	m  *cacheMetrics
	tr trace.Tracer // nil: tracing off
}

func (t timedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	start := time.Now()
	ctx, span := traceEmbed(ctx, t.tr, len(texts))
	v, err := t.Embedder.Embed(ctx, texts)
	endSpan(span, err)
	t.m.embedSeconds.WithLabelValues(result(err)).Observe(time.Since(start).Seconds())
	return v, err
}

// Truncated forwards the encoder's long-text report (embed.Truncator).
func (t timedEmbedder) Truncated(text string) bool {
	if tr, ok := t.Embedder.(embed.Truncator); ok {
		return tr.Truncated(text)
	}
	return false
}

// Covers forwards the encoder's coverage report (embed.Coverer).
func (t timedEmbedder) Covers(text string) bool {
	if c, ok := t.Embedder.(embed.Coverer); ok {
		return c.Covers(text)
	}
	return true
}

// timedIndex measures the index calls on the request path and write-back.
type timedIndex struct {
	cache.Index
	m  *cacheMetrics
	tr trace.Tracer // nil: tracing off
}

// WatchFlushes passes the cache's flush function on to a shared index
// (cache.SharedIndex); other indexes have no other processes' flushes.
func (t timedIndex) WatchFlushes(apply func(partition string)) {
	if s, ok := t.Index.(cache.SharedIndex); ok {
		s.WatchFlushes(apply)
	}
}

func (t timedIndex) Search(ctx context.Context, q cache.SearchQuery) ([]cache.Match, error) {
	start := time.Now()
	var span trace.Span
	if t.tr != nil {
		ctx, span = t.tr.Start(ctx, "search")
	}
	r, err := t.Index.Search(ctx, q)
	if span != nil {
		span.SetAttributes(attribute.Int("breakwater.search.matches", len(r)))
	}
	endSpan(span, err)
	t.m.indexSeconds.WithLabelValues("search", result(err)).Observe(time.Since(start).Seconds())
	return r, err
}

func (t timedIndex) Upsert(ctx context.Context, items []cache.IndexItem) error {
	start := time.Now()
	err := t.Index.Upsert(ctx, items)
	t.m.indexSeconds.WithLabelValues("upsert", result(err)).Observe(time.Since(start).Seconds())
	return err
}

func (t timedIndex) Get(ctx context.Context, key string) (cache.Entry, bool, error) {
	start := time.Now()
	e, ok, err := t.Index.Get(ctx, key)
	t.m.indexSeconds.WithLabelValues("get", result(err)).Observe(time.Since(start).Seconds())
	return e, ok, err
}
