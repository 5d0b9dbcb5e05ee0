package flow

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// exchange is one request on its way through the cached flow.
type exchange struct {
	srv      *Server
	c        echo.Context
	log      *slog.Logger // the server's; logger() adds the request id
	reqID    string
	format   Format
	endpoint string // format.Endpoint
	// home is the upstream of the API's requests for a model no route
	// lists (Options.APIUpstreams; "" = the default upstream).
	home      string
	body      []byte
	shape     requestShape
	key       cache.Key
	ctl       controls
	start     time.Time
	upstream  time.Duration // time spent waiting for the upstream
	mayStore  bool          // a cacheable answer is written back
	coalesced bool          // answered by another request's upstream call
	called    bool          // this request led an upstream call
	attempts  int           // upstream attempts of the call that answered
	probe     *probe        // live false-hit estimate (verify.go)
	// foreign is the answer of another end user's candidate the scope
	// refused (cache.Result.Foreign): a fresh answer that agrees with it
	// is stored as agreed.
	foreign []byte
	// usage is the answer's token usage and usageModel the model that
	// produced it: saved when this request reused it, spent when it led
	// the call.
	usage      Usage
	usageModel string
	// span is the request's server span (nil: tracing off), closed with
	// the outcome, status and similarity finish records.
	span       trace.Span
	outcome    string
	status     int
	similarity float32
}

// reuse notes that x is answered with the stored entry e, and says on the
// response what that saved.
func (x *exchange) reuse(e *cache.Entry) {
	h := x.c.Response().Header()
	if w, ok := e.Wire.(*wireBody); ok && w.usageSet && len(w.body) == len(e.Body) {
		// Read when it was stored: an exact hit does not scan the body.
		x.usage = w.usage
		if w.usage.Known {
			h[HeaderTokensSaved] = w.savedHeader
		}
	} else {
		x.usage = x.format.Usage(e.Body)
		setTokensSaved(h, x.usage)
	}
	x.usageModel = e.Model
}

// logger is the request's logger. It is built on first use: the request's
// own line (finish) carries the id as an attribute, and a logger.With per
// request was 3 % of an exact hit's CPU.
func (x *exchange) logger() *slog.Logger { return x.log.With("request_id", x.reqID) }

// serveCached is the cached flow: parse, exact tier, singleflight,
// semantic tier, caller, write-back.
func (s *Server) serveCached(c echo.Context, f Format, home string) error {
	endpoint := f.Endpoint
	x := &exchange{srv: s, c: c, log: s.log, reqID: requestIDOf(c), format: f, endpoint: endpoint, home: home, start: s.opts.Now()}
	if s.tracer != nil {
		s.startServerSpan(x)
		defer s.endServerSpan(x)
	}
	req := c.Request()
	body, answered, err := s.requestBody(c)
	if answered {
		return err
	}
	x.body = body
	x.ctl, err = parseControls(req.Header)
	if err != nil {
		return writeError(c, http.StatusBadRequest, "invalid_header", "breakwater: "+err.Error(), 0)
	}
	if s.opts.Cache == nil {
		// No cache, no key: for an API whose key reads the body alone, a
		// scan of what routing and streaming need (model, stream,
		// stream_options); the upstream validates the rest of its own API.
		// Anything else, or a body the scan leaves alone, is read by the
		// Format's own strict key decoding.
		if !f.BodyKeyed || scanShape(body, &x.shape) != nil {
			k, err := f.Key(cache.SharedPartition, req.Header, body, s.opts.Group)
			if err != nil {
				if !json.Valid(body) {
					return badBody(c, endpoint, body, err)
				}
				return writeError(c, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error(), 0)
			}
			x.shape = requestShape{Model: k.Model, Stream: k.Stream, Temperature: k.Temperature, IncludeUsage: k.IncludeUsage}
		}
		if f.PathModel != "" {
			x.shape.Model, x.shape.Stream = f.PathModel, f.PathStream
		}
		if x.shape.Model == "" {
			return writeError(c, http.StatusBadRequest, "invalid_request", `breakwater: invalid request: field "model" must be a non-empty string`, 0)
		}
		if x.shape.Stream {
			return s.streamMiss(x, OutcomeBypass)
		}
		return s.forward(x, OutcomeBypass)
	}
	partition := cache.SharedPartition
	if s.opts.Partitioner != nil {
		partition = s.opts.Partitioner.Partition(req.Header)
	}
	x.key, err = s.requestKey(f, partition, req.Header, body)
	if err != nil {
		if errors.Is(err, cache.ErrBadRequest) && !json.Valid(body) {
			return badBody(c, endpoint, body, err)
		}
		return writeError(c, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error(), 0)
	}
	if s.opts.EndUserHeader != "" {
		// The deployment's own header names the end user, for every API.
		if v := req.Header.Get(s.opts.EndUserHeader); v != "" {
			x.key.EndUser = v
		}
	}
	// The key parsed the body already, with exact field names: routing and
	// forwarding read what the key read.
	x.shape = requestShape{Model: x.key.Model, Stream: x.key.Stream, Temperature: x.key.Temperature, IncludeUsage: x.key.IncludeUsage}
	// JSON and streams take the same decisions; only the writers differ: a
	// stream hit is replayed as SSE, a stream miss is relayed as it arrives
	// (stream.go).
	hit, miss := s.writeCached, s.forward
	if x.shape.Stream {
		hit, miss = s.replayHit, s.streamMiss
	}
	if s.bypass(x) {
		return miss(x, OutcomeBypass)
	}
	x.mayStore = !x.ctl.noStore
	if !x.ctl.noCache {
		if res, outcome, ok := s.lookup(x); ok {
			err := hit(x, res, outcome)
			// Served: a verified semantic hit becomes the exact answer
			// for this wording (a sampled one never reaches here).
			s.opts.Cache.Promote(x.key, res)
			return err
		}
	}
	outcome := s.missOutcome(x)
	if x.ctl.noCache {
		// The client refused cached answers: not eligible for the hit rate.
		outcome = OutcomeBypass
	}
	return miss(x, outcome)
}

// badBody answers a body that is not JSON (or not JSON of the right types)
// with 400 invalid_json, naming the decoder's complaint.
func badBody(c echo.Context, endpoint string, body []byte, err error) error {
	if !json.Valid(body) {
		var probe any
		err = json.Unmarshal(body, &probe)
	}
	return writeError(c, http.StatusBadRequest, "invalid_json", "breakwater: the request body is not valid JSON for "+endpoint+": "+err.Error(), 0)
}

// bypass reports whether the request must not touch the cache at all.
func (s *Server) bypass(x *exchange) bool {
	if s.opts.Cache == nil {
		return true
	}
	if x.ctl.noCache && x.ctl.noStore {
		return true
	}
	temp := 1.0 // the API's default when a request sends none
	if x.shape.Temperature != nil {
		temp = *x.shape.Temperature
	}
	if s.opts.MaxTemperature >= 0 && temp > s.opts.MaxTemperature {
		return true
	}
	return false
}

// Header values every exact hit sends, built once: http.Header.Set would
// allocate a one-element slice for each on every hit. The keys are in
// canonical form, as Set would have made them.
var (
	hitExactValue      = []string{OutcomeHitExact}
	cacheUpstreamValue = []string{"cache"}
)

// writeCached answers from the cache, rewriting id and created so every
// answer looks like a fresh completion to the client.
func (s *Server) writeCached(x *exchange, res cache.Result, outcome string) error {
	h := x.c.Response().Header()
	if outcome == OutcomeHitExact {
		h[HeaderCache] = hitExactValue // shared: net/http only reads it
	} else {
		h.Set(HeaderCache, outcome)
		h.Set(HeaderSimilarity, strconv.FormatFloat(float64(res.Similarity), 'f', 4, 32))
	}
	h.Set("Age", strconv.Itoa(int(res.Age/time.Second)))
	h[HeaderUpstream] = cacheUpstreamValue
	x.reuse(&res.Entry)
	s.finish(x, outcome, http.StatusOK, res.Similarity, "")
	if x.format.FreshIDs != nil {
		// Straight from the bytes prepared when it was stored.
		return storedOf(&res.Entry, x.format).write(x.c, s.opts.Now())
	}
	body := x.format.Fresh(res.Entry.Body, s.opts.Now())
	return x.c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
}

// forward sends a miss (or bypass) upstream, sharing the call with identical
// misses in flight, and writes a cacheable answer back to both tiers.
func (s *Server) forward(x *exchange, outcome string) error {
	req := x.c.Request()
	ureq := &upstream.Request{
		Path:      x.endpoint,
		Model:     x.shape.Model,
		Body:      x.body,
		Header:    req.Header,
		RequestID: req.Header.Get(HeaderRequestID),
		Class:     x.ctl.class,
		GenAI:     s.genAIRequest(x.format, false),
		// An answer whose clients all left is still worth its price: the
		// next asker gets it from the cache.
		FinishAbandoned: x.mayStore,
	}
	s.shapeRequest(x.format, x.home, ureq)
	// The call may run on after this handler has returned (for the other
	// waiters of a coalesced flight, or for nobody: an answer whose clients
	// all left is still finished by the caller, and cached here for the
	// next asker), so it touches nothing of x.
	f, key, mayStore, foreign := x.format, x.key, x.mayStore, x.foreign
	call := func(ctx context.Context) (*upstream.Response, error) {
		s.stats.calls.Add(1)
		resp, err := s.opts.Caller.Do(ctx, ureq)
		if err == nil && resp.Rest == nil {
			s.learnOwner(ureq.Header, f, resp.Status, resp.Body, resp.Upstream)
			if mayStore && resp.Status == http.StatusOK {
				s.storeBody(context.WithoutCancel(ctx), key, f, resp.Model, resp.Body, foreign)
			}
		}
		return resp, err
	}
	var (
		resp   *upstream.Response
		shared bool
		err    error
	)
	t0 := time.Now()
	if !x.mayStore && outcome == OutcomeBypass {
		resp, err = call(req.Context())
	} else {
		// Coalesce on the exact key: identical requests of one tenant.
		resp, shared, err = s.flights.do(req.Context(), x.key.Exact, call)
		if errors.Is(err, errNotShared) {
			resp, err = call(req.Context())
		}
	}
	// Time spent waiting for the upstream (or for the flight it joined), so
	// breakwater_overhead_seconds is what Breakwater itself added.
	x.upstream = time.Since(t0)
	x.called = !shared
	if shared {
		s.countCoalesced()
		x.coalesced = true
	}
	if err == nil && resp.Rest == nil && resp.Status == http.StatusOK {
		// Read once, here: the call may serve several waiters.
		x.usage, x.usageModel = f.Usage(resp.Body), resp.Model
	}
	if x.called {
		s.observeCall(f, ureq.Model, resp, err, x.upstream, x.usage)
	}
	if err != nil {
		return s.upstreamFailed(x, outcome, err, s.writeCached)
	}
	if resp.Rest != nil {
		// Longer than server.max_answer_bytes: relayed, never cached.
		defer resp.Rest.Close()
		s.opts.Metrics.limitReached("server.max_answer_bytes")
	}
	s.checkFresh(x, resp)
	h := x.c.Response().Header()
	h.Set(HeaderCache, outcome)
	h.Set(HeaderUpstream, resp.Target)
	h.Set(HeaderAttempts, strconv.Itoa(resp.Attempts))
	x.attempts = resp.Attempts
	if shared {
		h.Set("X-Breakwater-Coalesced", "true")
		setTokensSaved(h, x.usage)
	}
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = echo.MIMEApplicationJSON
	}
	s.finish(x, outcome, resp.Status, 0, resp.Target)
	if resp.Rest != nil {
		return relayLong(x.c, resp, ct)
	}
	return x.c.Blob(resp.Status, ct, resp.Body)
}

// upstreamFailed answers a request whose upstream call failed: nothing when
// the client went away, a stale near match (written by serve, as JSON or as
// a replayed stream) when allowed, else the caller's error.
func (s *Server) upstreamFailed(x *exchange, outcome string, err error, serve func(*exchange, cache.Result, string) error) error {
	if x.c.Request().Context().Err() != nil {
		// The client went away; nobody is there to answer.
		s.finish(x, outcome, 499, 0, "")
		return nil
	}
	if stale, ok := s.staleAnswer(x); ok {
		return serve(x, stale, OutcomeStale)
	}
	s.stats.errors.Add(1)
	s.finish(x, outcome, statusOf(err), 0, "")
	// A miss that failed upstream (502, 429, 503) is still a miss.
	x.c.Response().Header().Set(HeaderCache, outcome)
	return writeUpstreamError(x.c, err)
}

// lookup asks the cache for x, with the request's controls, and names the
// outcome of a hit.
func (s *Server) lookup(x *exchange) (cache.Result, string, bool) {
	res, ok := s.opts.Cache.Lookup(s.lookupContext(x), x.key, cache.LookupOptions{
		Threshold:    x.ctl.threshold,
		MaxAge:       x.ctl.maxAge,
		SkipSemantic: !x.format.Semantic(),
	})
	// The write-back uses the lookup's embedding of the question.
	x.key.Vector = res.Vector
	if !ok {
		s.noteNear(x, res)
		if res.Foreign != nil {
			x.foreign = res.Foreign.Entry.Body
		}
		return res, "", false
	}
	if res.Tier == cache.TierSemantic {
		if s.sampleHit(x, res) {
			return res, "", false
		}
		return res, OutcomeHitSemantic, true
	}
	return res, OutcomeHitExact, true
}

// storeBody stores a finished completion under key; anything that is not a
// finished answer is dropped here. foreign is the answer of another end
// user's candidate that the scope refused this request (nil: none): when
// the fresh answer is the same answer, the entry is stored as agreed, since
// two end users' questions then drew one answer from the model
// independently, and other end users may be served it.
func (s *Server) storeBody(ctx context.Context, key cache.Key, f Format, model string, body, foreign []byte) {
	if !f.Finished(body) {
		return
	}
	agreed := foreign != nil && s.sameAnswer(ctx, f.AnswerText(foreign), f.AnswerText(body))
	now := s.opts.Now()
	w := prepareStored(body, f) // a hit writes it without a scan
	w.usage, w.usageSet = f.Usage(body), true
	if w.usage.Known {
		w.savedHeader = []string{tokensSavedValue(w.usage)}
	}
	s.opts.Cache.Store(ctx, key, cache.Entry{
		Key:         key.Exact,
		Partition:   key.Partition,
		Fingerprint: key.Fingerprint,
		Query:       key.Query,
		Model:       model,
		Agreed:      agreed,
		Body:        body,
		Wire:        w,
		Created:     now,
		Expires:     now.Add(s.opts.TTL),
	})
}

// staleAnswer looks for the nearest cached answer down to StaleThreshold when
// no upstream could answer (degraded mode).
func (s *Server) staleAnswer(x *exchange) (cache.Result, bool) {
	if !s.opts.StaleIfError || s.opts.Cache == nil {
		return cache.Result{}, false
	}
	return s.opts.Cache.Lookup(x.c.Request().Context(), x.key, cache.LookupOptions{
		StaleThreshold: s.opts.StaleThreshold,
		SkipSemantic:   !x.format.Semantic(),
	})
}

func statusOf(err error) int {
	var ue *upstream.Error
	if errors.As(err, &ue) {
		return ue.Status
	}
	return http.StatusBadGateway
}

// finish records the request's outcome in stats, metrics and one log line.
func (s *Server) finish(x *exchange, outcome string, status int, similarity float32, target string) {
	s.count(x.c, outcome)
	if status/100 == 2 && x.c.Request().Context().Err() == nil {
		s.stats.delivered.Add(1)
	}
	now := s.opts.Now()
	s.window.record(now, outcome, x.coalesced, x.called)
	s.countTokens(x, outcome)
	if x.span != nil {
		x.outcome, x.status, x.similarity = outcome, status, similarity
	}
	total := now.Sub(x.start)
	if m := s.opts.Metrics; m != nil {
		m.observe(x.endpoint, outcome, total, x.upstream, similarity)
	}
	ctx := x.c.Request().Context()
	if !x.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	// Typed attributes: no boxing of each value into an any. Durations are
	// whole microseconds: slog's JSON handler writes a float through
	// encoding/json (reflection and a buffer per value; 2.5 % of an exact
	// hit for two of them) and an integer with strconv.
	var buf [10]slog.Attr
	attrs := append(buf[:0], slog.String("request_id", x.reqID), slog.String("endpoint", x.endpoint), slog.String("outcome", outcome),
		slog.Int("status", status), slog.Int64("duration_us", total.Microseconds()))
	switch {
	case similarity == 1:
		// An exact hit's 1, as an integer: the same JSON token, while slog's
		// JSON handler writes every float through encoding/json (1.8 % of
		// an exact hit's CPU).
		attrs = append(attrs, slog.Int("similarity", 1))
	case similarity > 0:
		attrs = append(attrs, slog.Float64("similarity", float64(similarity)))
	}
	if target != "" {
		attrs = append(attrs, slog.String("target", target), slog.Int("attempts", x.attempts),
			slog.Int64("upstream_us", x.upstream.Microseconds()))
	}
	// The record goes to the handler directly: Logger.LogAttrs would also
	// capture the caller's program counter (runtime.Callers, 1.5 % of an
	// exact hit), which the access line never prints.
	r := slog.NewRecord(now, slog.LevelInfo, "request", 0)
	r.AddAttrs(attrs...)
	_ = x.log.Handler().Handle(ctx, r)
}
