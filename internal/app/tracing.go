package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/config"
)

// tracingOn reports whether traces are exported: [tracing].endpoint, or the
// OpenTelemetry SDK's own variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), unless OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/).
func tracingOn(cfg *config.Config, env func(string) string) bool {
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") || env("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return cfg.Tracing.Endpoint != "" || env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// newTracerProvider builds the SDK's tracer provider with an OTLP/HTTP
// exporter behind a batch processor. The exporter reads the standard
// OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout, compression,
// TLS); the SDK reads OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_*; the
// resource reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, with
// service.name "breakwater" unless they say otherwise. A configured
// endpoint wins over the variables' endpoint. nil when tracing is off.
func newTracerProvider(ctx context.Context, cfg *config.Config, env func(string) string) (*sdktrace.TracerProvider, error) {
	if !tracingOn(cfg, env) {
		return nil, nil
	}
	var eopts []otlptracehttp.Option
	if e := cfg.Tracing.Endpoint; e != "" {
		eopts = append(eopts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(e, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, eopts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "breakwater")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // later detectors win: OTEL_SERVICE_NAME overrides the default
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Spans of the lookup: each tier's work as a child of the request's span.
const tracerName = "github.com/breakwater-dev/breakwater/cache"

// traceEmbed opens the span of one embedding call; a no-op span when
// tracing is off.
func traceEmbed(ctx context.Context, tr trace.Tracer, texts int) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, nil
	}
	return tr.Start(ctx, "embed", trace.WithAttributes(attribute.Int("breakwater.embed.texts", texts)))
}

func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "")
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
	}
	span.End()
}

// tracedVerifier records each judge call as a span, and its verdict on
// the request's server span (the lookup's context carries it).
type tracedVerifier struct {
	cache.Verifier
	tr trace.Tracer
}

func (v tracedVerifier) Verify(ctx context.Context, partition, query string, cands []cache.Entry) ([]bool, bool) {
	server := trace.SpanFromContext(ctx)
	ctx, span := v.tr.Start(ctx, "judge", trace.WithAttributes(attribute.Int("breakwater.judge.candidates", len(cands))))
	start := time.Now()
	verdicts, ok := v.Verifier.Verify(ctx, partition, query, cands)
	verdict := "none" // no verdict: the static threshold decides
	if ok {
		verdict = "reject"
		for _, accept := range verdicts {
			if accept {
				verdict = "accept"
				break
			}
		}
	}
	span.SetAttributes(attribute.String("breakwater.judge.verdict", verdict),
		attribute.Float64("breakwater.judge.seconds", time.Since(start).Seconds()))
	span.End()
	server.SetAttributes(attribute.String("breakwater.judge.verdict", verdict))
	return verdicts, ok
}
