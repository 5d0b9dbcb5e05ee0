package proxy

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
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

// genAIOf names an API's operation and provider as the GenAI conventions
// do (gen_ai.operation.name, gen_ai.provider.name): the provider is the
// one whose API the request speaks, which is what an OpenAI-compatible
// server behind the sidecar also answers.
func genAIOf(f Format) (op, provider string) {
	if f.GenAIOperation != "" {
		return f.GenAIOperation, f.GenAIProvider
	}
	return "chat", ""
}

// startServerSpan opens x's server span, continuing the client's W3C
// traceparent, and makes it the request's context so the lookup, the queue
// and the attempts become its children. Only called with tracing on.
func (s *Server) startServerSpan(x *exchange) {
	req := x.c.Request()
	ctx := propagation.TraceContext{}.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	op, _ := genAIOf(x.format)
	ctx, x.span = s.tracer.Start(ctx, req.Method+" "+x.endpoint, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrHTTPMethod.String(req.Method), attrHTTPRoute.String(x.endpoint), attrGenAIOp.String(op)))
	x.c.SetRequest(req.WithContext(ctx))
}

// endServerSpan closes x's server span with the request's outcome.
func (s *Server) endServerSpan(x *exchange) {
	sp := x.span
	if x.shape.Model != "" {
		sp.SetAttributes(attrGenAIModel.String(x.shape.Model))
	}
	if x.outcome != "" {
		sp.SetAttributes(attrCacheOutcome.String(x.outcome), attrHTTPStatus.Int(x.status))
		switch x.outcome {
		case OutcomeHitExact:
			sp.SetAttributes(attrCacheTier.String(cache.TierExact))
		case OutcomeHitSemantic, OutcomeStale:
			sp.SetAttributes(attrCacheTier.String(cache.TierSemantic))
		}
		if x.similarity > 0 {
			sp.SetAttributes(attrSimilarity.Float64(float64(x.similarity)))
		}
		if x.coalesced {
			sp.SetAttributes(attrCoalesced.Bool(true))
		}
		if x.usage.Known {
			if x.coalesced || x.outcome == OutcomeHitExact || x.outcome == OutcomeHitSemantic || x.outcome == OutcomeStale {
				sp.SetAttributes(attrSavedIn.Int64(int64(x.usage.Input)), attrSavedOut.Int64(int64(x.usage.Output)))
			} else {
				sp.SetAttributes(attrGenAIInTok.Int64(int64(x.usage.Input)), attrGenAIOutTok.Int64(int64(x.usage.Output)))
			}
		}
		if x.status >= 400 {
			sp.SetAttributes(attrErrorType.String(httpStatusText(x.status)))
			if x.status >= 500 {
				sp.SetStatus(codes.Error, "")
			}
		}
	}
	sp.End()
}

// genAIRequest is what the caller's attempt spans need of this request;
// zero with tracing off (no closures on the miss path then).
func (s *Server) genAIRequest(f Format, stream bool) upstream.GenAI {
	if s.tracer == nil {
		return upstream.GenAI{}
	}
	op, provider := genAIOf(f)
	g := upstream.GenAI{Operation: op, Provider: provider, Usage: func(body []byte) upstream.Tokens {
		u := f.Usage(body)
		return upstream.Tokens{Input: u.Input, Output: u.Output, Model: responseModel(body), Known: u.Known}
	}}
	if stream {
		g.Stream = &upstream.Tokens{}
	}
	return g
}

// responseModel is the model an answer says produced it: "model" in
// OpenAI's and Anthropic's answers, "modelVersion" in Gemini's.
func responseModel(body []byte) string {
	var model string
	wire.TopFields(body, func(key []byte, vStart, vEnd int) bool {
		switch string(key) {
		case "model", "modelVersion":
			v := body[vStart:vEnd]
			if len(v) >= 2 && v[0] == '"' {
				model = string(v[1 : len(v)-1])
			}
		}
		return true
	})
	return model
}

func httpStatusText(status int) string {
	var b [3]byte
	b[0], b[1], b[2] = byte('0'+status/100%10), byte('0'+status/10%10), byte('0'+status%10)
	return string(b[:])
}
