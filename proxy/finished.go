package proxy

import (
	"context"
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/flow"
)

// serveCached answers a request of a route served by f through the flow,
// whose models no route lists go to upstream home: the body within the
// server's limits, the trace's server span around it, and the Record to
// the subscribers.
func (s *Server) serveCached(c echo.Context, f Format, home string) error {
	r := flow.Request{ID: requestIDOf(c), Format: f, Home: home, Start: s.opts.Now()}
	var span spanEnd
	if s.tracer != nil {
		span = s.startServerSpan(c, f)
	}
	var rec *flow.Record
	body, answered, err := s.requestBody(c)
	if !answered {
		r.HTTP, r.Body = c.Request(), body
		rec, err = s.flow.Serve(c.Response(), r)
	}
	if rec != nil {
		s.finished(c, rec)
	}
	if span != nil {
		span(rec)
	}
	return err
}

// finished hands a request's Record to every subscriber: /stats' counters,
// the observer (tokens, rolling windows, metrics) and the access log. The
// server span takes it in serveFlow.
func (s *Server) finished(c echo.Context, r *flow.Record) {
	s.count(c, r.Outcome)
	s.stats.finished(r)
	s.obs.Finished(r)
	s.accessLog(c.Request().Context(), r)
}

// finished counts what /stats' totals take from a Record beyond its outcome.
func (c *counters) finished(r *flow.Record) {
	if r.Delivered {
		c.delivered.Add(1)
	}
	if r.Failed {
		c.errors.Add(1)
	}
	if r.Coalesced {
		c.coalesced.Add(1)
	}
}

// accessLog writes the request's one line.
func (s *Server) accessLog(ctx context.Context, r *flow.Record) {
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	// Typed attributes: no boxing of each value into an any. Durations are
	// whole microseconds: slog's JSON handler writes a float through
	// encoding/json (reflection and a buffer per value; 2.5 % of an exact
	// hit for two of them) and an integer with strconv.
	var buf [10]slog.Attr
	attrs := append(buf[:0], slog.String("request_id", r.RequestID), slog.String("endpoint", r.Endpoint), slog.String("outcome", r.Outcome),
		slog.Int("status", r.Status), slog.Int64("duration_us", r.End.Sub(r.Start).Microseconds()))
	switch {
	case r.Similarity == 1:
		// An exact hit's 1, as an integer: the same JSON token, while slog's
		// JSON handler writes every float through encoding/json (1.8 % of
		// an exact hit's CPU).
		attrs = append(attrs, slog.Int("similarity", 1))
	case r.Similarity > 0:
		attrs = append(attrs, slog.Float64("similarity", float64(r.Similarity)))
	}
	switch {
	case r.Target != "":
		attrs = append(attrs, slog.String("target", r.Target), slog.Int("attempts", r.Attempts),
			slog.Int64("upstream_us", r.Upstream.Microseconds()))
	case r.Attempts > 0:
		attrs = append(attrs, slog.Int("attempts", r.Attempts), slog.Int64("upstream_us", r.Upstream.Microseconds()))
	}
	// The call's attempts merged into this line, so its retries read as
	// one call; the caller logs each attempt at Debug only. A call that
	// was answered at its first attempt says nothing more than target and
	// attempts do.
	if t := r.Tried; t != nil && (t.N > 1 || r.Failed) {
		attrs = append(attrs, slog.String("tried", t.String()))
	}
	// The record goes to the handler directly: Logger.LogAttrs would also
	// capture the caller's program counter (runtime.Callers, 1.5 % of an
	// exact hit), which the access line never prints.
	rec := slog.NewRecord(r.End, slog.LevelInfo, "request", 0)
	rec.AddAttrs(attrs...)
	_ = s.log.Handler().Handle(ctx, rec)
}
