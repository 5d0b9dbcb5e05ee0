package upstream

import (
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// GenAI is what the OpenTelemetry GenAI semantic conventions need to know
// about a request that the caller cannot read itself: set by the client of
// the caller when tracing is on, ignored otherwise.
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/)
type GenAI struct {
	// Operation is gen_ai.operation.name: "chat", "text_completion",
	// "embeddings", "generate_content".
	Operation string
	// Provider is gen_ai.provider.name: "openai", "anthropic", "gcp.gemini".
	Provider string
	// Usage reads a JSON answer's token usage and the model that produced
	// it (gen_ai.usage.*, gen_ai.response.model). nil: none recorded.
	Usage func(body []byte) Tokens
	// Stream is filled by the client with a streamed answer's usage before
	// it calls StreamResponse.Done; the attempt's span reads it then.
	Stream *Tokens
	// Judge marks a call of the cache's judge, asking whether a cached
	// answer serves a new question (breakwater.judge = true on its spans).
	Judge bool
}

// Tokens is an answer's token usage as its provider reported it.
type Tokens struct {
	Input, Output uint64
	// Model is the model the provider says answered ("" when it says none).
	Model string
	Known bool
}

// Attribute keys of the GenAI and HTTP conventions.
const (
	attrOperation   = attribute.Key("gen_ai.operation.name")
	attrProvider    = attribute.Key("gen_ai.provider.name")
	attrReqModel    = attribute.Key("gen_ai.request.model")
	attrRespModel   = attribute.Key("gen_ai.response.model")
	attrInTokens    = attribute.Key("gen_ai.usage.input_tokens")
	attrOutTokens   = attribute.Key("gen_ai.usage.output_tokens")
	attrErrorType   = attribute.Key("error.type")
	attrHTTPStatus  = attribute.Key("http.response.status_code")
	attrServerAddr  = attribute.Key("server.address")
	attrTarget      = attribute.Key("breakwater.target")
	attrAttempt     = attribute.Key("breakwater.attempt")
	attrQueueTarget = attribute.Key("breakwater.queue.target")
	attrJudge       = attribute.Key("breakwater.judge")
)

// queueSpanMin is the shortest admission that gets a queue span: a slot
// taken at once (well under a microsecond) is not a wait worth a span.
const queueSpanMin = 100 * time.Microsecond

// traceQueue records the wait of one admission to t (its lane, then its
// upstream's pool), begun at start,
// as a span under the request's; nothing when tracing is off or the slot
// was free.
func (k *call) traceQueue(t *target, start time.Time, err error) {
	tr := k.c.tracer
	if tr == nil {
		return
	}
	end := time.Now()
	if end.Sub(start) < queueSpanMin && err == nil {
		return
	}
	_, span := tr.Start(k.ctx, "queue "+t.name, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrQueueTarget.String(t.name)))
	if err != nil {
		span.SetStatus(codes.Error, "shed")
		span.SetAttributes(attrErrorType.String("shed"))
	}
	span.End(trace.WithTimestamp(end))
}

// startAttempt opens the client span of one attempt, named as the GenAI
// conventions ask ("{gen_ai.operation.name} {gen_ai.request.model}"), and
// puts its context in the attempt's traceparent (W3C Trace Context), so the
// upstream continues the client's trace. nil when tracing is off.
func (k *call) startAttempt(x *exchange) trace.Span {
	tr := k.c.tracer
	if tr == nil {
		return nil
	}
	g := k.req.GenAI
	op := g.Operation
	if op == "" {
		op = "chat"
	}
	model := x.m.t.model
	if model == "" {
		model = k.req.Model
	}
	attrs := []attribute.KeyValue{
		attrOperation.String(op), attrReqModel.String(model),
		attrTarget.String(x.m.t.name), attrAttempt.Int(k.rep.attempts + 1),
	}
	if g.Provider != "" {
		attrs = append(attrs, attrProvider.String(g.Provider))
	}
	if g.Judge {
		attrs = append(attrs, attrJudge.Bool(true))
	}
	if host := hostOf(x.url); host != "" {
		attrs = append(attrs, attrServerAddr.String(host))
	}
	ctx, span := tr.Start(k.ctx, op+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(x.header))
	return span
}

// endAttempt closes an attempt's span with what it got: the HTTP status,
// error.type for a failure (the status, or the kind of error), and the
// answer's usage when the request's format reads it. ferr is a live
// stream's end (nil for a JSON answer or a clean stream).
func (k *call) endAttempt(span trace.Span, r *result, ferr error) {
	if span == nil {
		return
	}
	status := 0
	if r.resp != nil {
		status = r.resp.StatusCode
		span.SetAttributes(attrHTTPStatus.Int(status))
	}
	g := k.req.GenAI
	var tok Tokens
	switch {
	case r.finish != nil && g.Stream != nil:
		tok = *g.Stream
	case r.err == nil && status/100 == 2 && g.Usage != nil && r.finish == nil:
		tok = g.Usage(r.body)
	}
	if tok.Known {
		span.SetAttributes(attrInTokens.Int64(int64(tok.Input)), attrOutTokens.Int64(int64(tok.Output)))
	}
	if tok.Model != "" {
		span.SetAttributes(attrRespModel.String(tok.Model))
	}
	var etype string
	switch {
	case r.err != nil:
		etype = r.reason
		if etype == "" {
			etype = r.out.String()
		}
	case status >= 400:
		etype = strconv.Itoa(status)
	case ferr != nil:
		etype = streamOutcome(k.ctx, ferr).String()
	}
	if etype != "" {
		span.SetAttributes(attrErrorType.String(etype))
		span.SetStatus(codes.Error, etype)
	}
	span.End()
}

// hostOf is the host of an upstream URL, without parsing it fully.
func hostOf(u string) string {
	for _, p := range []string{"https://", "http://"} {
		if len(u) > len(p) && u[:len(p)] == p {
			u = u[len(p):]
			for i := 0; i < len(u); i++ {
				if u[i] == '/' || u[i] == ':' {
					return u[:i]
				}
			}
			return u
		}
	}
	return ""
}

// tracerOf is the caller's tracer; nil when tracing is off.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer("github.com/breakwater-dev/breakwater/proxy/upstream")
}
