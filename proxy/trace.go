package proxy

import (
	"github.com/breakwater-dev/breakwater/proxy/flow"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/cache"
)

// Attributes of the server span. The cache's own are namespaced; the rest
// follow the HTTP and GenAI semantic conventions. No prompt, answer or key
// is ever recorded: only names, numbers and the outcome.
const (
	attrCacheOutcome = attribute.Key("breakwater.cache.outcome")
	attrCacheTier    = attribute.Key("breakwater.cache.tier")
	attrSimilarity   = attribute.Key("breakwater.cache.similarity")
	attrCoalesced    = attribute.Key("breakwater.coalesced")
	attrSavedIn      = attribute.Key("breakwater.tokens_saved.input")
	attrSavedOut     = attribute.Key("breakwater.tokens_saved.output")
	attrHTTPMethod   = attribute.Key("http.request.method")
	attrHTTPRoute    = attribute.Key("http.route")
	attrHTTPStatus   = attribute.Key("http.response.status_code")
	attrGenAIOp      = attribute.Key("gen_ai.operation.name")
	attrGenAIModel   = attribute.Key("gen_ai.request.model")
	attrGenAIInTok   = attribute.Key("gen_ai.usage.input_tokens")
	attrGenAIOutTok  = attribute.Key("gen_ai.usage.output_tokens")
	attrErrorType    = attribute.Key("error.type")
)

// spanEnd closes a server span with the request's Record (nil: answered
// before the flow named an outcome).
type spanEnd func(r *flow.Record)

// startServerSpan opens the request's server span, continuing the client's
// W3C traceparent, and makes it the request's context so the lookup, the
// queue and the attempts become its children. Only called with tracing on.
func (s *Server) startServerSpan(c echo.Context, f Format) spanEnd {
	req := c.Request()
	ctx := propagation.TraceContext{}.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	op, _ := flow.GenAIOf(f)
	endpoint := f.Endpoint
	ctx, sp := s.tracer.Start(ctx, req.Method+" "+endpoint, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrHTTPMethod.String(req.Method), attrHTTPRoute.String(endpoint), attrGenAIOp.String(op)))
	c.SetRequest(req.WithContext(ctx))
	return func(r *flow.Record) { endServerSpan(sp, r) }
}

// endServerSpan closes sp with the request's outcome.
func endServerSpan(sp trace.Span, r *flow.Record) {
	if r == nil {
		sp.End()
		return
	}
	if r.Model != "" {
		sp.SetAttributes(attrGenAIModel.String(r.Model))
	}
	sp.SetAttributes(attrCacheOutcome.String(r.Outcome), attrHTTPStatus.Int(r.Status))
	switch r.Outcome {
	case OutcomeHitExact:
		sp.SetAttributes(attrCacheTier.String(cache.TierExact))
	case OutcomeHitSemantic, OutcomeStale:
		sp.SetAttributes(attrCacheTier.String(cache.TierSemantic))
	}
	if r.Similarity > 0 {
		sp.SetAttributes(attrSimilarity.Float64(float64(r.Similarity)))
	}
	if r.Coalesced {
		sp.SetAttributes(attrCoalesced.Bool(true))
	}
	if r.Usage.Known {
		if r.Saved() {
			sp.SetAttributes(attrSavedIn.Int64(int64(r.Usage.Input)), attrSavedOut.Int64(int64(r.Usage.Output)))
		} else {
			sp.SetAttributes(attrGenAIInTok.Int64(int64(r.Usage.Input)), attrGenAIOutTok.Int64(int64(r.Usage.Output)))
		}
	}
	if r.Status >= 400 {
		sp.SetAttributes(attrErrorType.String(flow.StatusText(r.Status)))
		if r.Status >= 500 {
			sp.SetStatus(codes.Error, "")
		}
	}
	sp.End()
}
