package flow

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/flow/stored"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// exchange is one request on its way through the cached flow: what it
// asked, what the cache said, and its Record as it fills.
type exchange struct {
	srv    *Flow
	w      http.ResponseWriter
	req    *http.Request
	format Format
	home   string // Request.Home
	body   []byte
	shape  requestShape
	key    cache.Key
	ctl    controls
	probe  *probe // live false-hit estimate (verify.go)
	// mayStore: a cacheable answer is written back.
	mayStore bool
	// miss is the lookup's handle for the write-back (cache.Result.Miss):
	// it stores the answer with the lookup's embedding of the query.
	miss cache.Miss
	// foreign is the answer of another end user's candidate the scope
	// refused (cache.Result.Foreign): a fresh answer that agrees with it
	// is stored as agreed.
	foreign []byte
	rec     Record
}

// end notes how the request was answered.
func (x *exchange) end(outcome string, status int, similarity float32, target string) {
	x.rec.Outcome, x.rec.Status, x.rec.Similarity, x.rec.Target = outcome, status, similarity, target
}

// reuse notes that x is answered with the stored entry e, and says on the
// response what that saved.
func (x *exchange) reuse(e *cache.Entry) {
	h := x.w.Header()
	if u, saved, ok := stored.UsageOf(e); ok {
		// Read when it was stored: an exact hit does not scan the body.
		x.rec.Usage = u
		if u.Known {
			h[HeaderTokensSaved] = saved
		}
	} else {
		x.rec.Usage = x.format.Usage(e.Body)
		setTokensSaved(h, x.rec.Usage)
	}
	x.rec.UsageModel = e.Model
}

// logger is the request's logger.
func (x *exchange) logger() *slog.Logger { return x.srv.log.With("request_id", x.rec.RequestID) }

func (s *Flow) newExchange(w http.ResponseWriter, r *Request) *exchange {
	start := r.Start
	if start.IsZero() {
		start = s.opts.Now()
	}
	return &exchange{srv: s, w: w, req: r.HTTP, format: r.Format, home: r.Home, body: r.Body,
		rec: Record{RequestID: r.ID, Endpoint: r.Format.Endpoint, Start: start}}
}

// record completes x's Record, or returns nil when the request was answered
// before the flow named an outcome (a bad header or body): the adapter
// counts those.
func (x *exchange) record() *Record {
	if x.rec.Outcome == "" {
		return nil
	}
	r := &x.rec
	r.Model, r.Partition = x.shape.Model, x.key.Partition
	r.End = x.srv.opts.Now()
	r.Delivered = r.Status/100 == 2 && x.req.Context().Err() == nil
	return r
}

// Serve answers r through the cache: parse, exact tier, singleflight,
// semantic tier, caller, write-back, relay or replay. It writes the answer
// to w and returns the request's Record (nil: answered before the flow
// named an outcome, with a 400 in the API's shape).
func (s *Flow) Serve(w http.ResponseWriter, r Request) (*Record, error) {
	x := s.newExchange(w, &r)
	err := s.serve(x)
	return x.record(), err
}

func (s *Flow) serve(x *exchange) error {
	f, req, body, endpoint := x.format, x.req, x.body, x.rec.Endpoint
	var err error
	x.ctl, err = parseControls(req.Header)
	if err != nil {
		return WriteError(x.w, f, http.StatusBadRequest, "invalid_header", "breakwater: "+err.Error(), 0)
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
					return badBody(x.w, f, endpoint, body, err)
				}
				return WriteError(x.w, f, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error(), 0)
			}
			x.shape = shapeOf(k)
		}
		if f.PathModel != "" {
			x.shape.Model, x.shape.Stream = f.PathModel, f.PathStream
		}
		if x.shape.Model == "" {
			return WriteError(x.w, f, http.StatusBadRequest, "invalid_request", `breakwater: invalid request: field "model" must be a non-empty string`, 0)
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
	k, err := s.requestKey(f, partition, req.Header, body)
	if err != nil {
		if errors.Is(err, cache.ErrBadRequest) && !json.Valid(body) {
			return badBody(x.w, f, endpoint, body, err)
		}
		return WriteError(x.w, f, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error(), 0)
	}
	x.key = k.Key
	if s.opts.EndUserHeader != "" {
		// The deployment's own header names the end user, for every API.
		if v := req.Header.Get(s.opts.EndUserHeader); v != "" {
			x.key.EndUser = v
		}
	}
	// The key parsed the body already, with exact field names: routing and
	// forwarding read what the key read.
	x.shape = shapeOf(k)
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
func badBody(w http.ResponseWriter, f Format, endpoint string, body []byte, err error) error {
	if !json.Valid(body) {
		var probe any
		err = json.Unmarshal(body, &probe)
	}
	return WriteError(w, f, http.StatusBadRequest, "invalid_json", "breakwater: the request body is not valid JSON for "+endpoint+": "+err.Error(), 0)
}

// bypass reports whether the request must not touch the cache at all.
func (s *Flow) bypass(x *exchange) bool {
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

// setHitHeaders writes the headers of an answer served from the cache: the
// outcome, a semantic hit's similarity, the entry's Age, and "cache" as
// the upstream. With setCallHeaders, the one place the flow's
// X-Breakwater-* headers are written.
func setHitHeaders(h http.Header, res *cache.Result, outcome string) {
	if outcome == OutcomeHitExact {
		h[HeaderCache] = hitExactValue // shared: net/http only reads it
	} else {
		h.Set(HeaderCache, outcome)
		h.Set(HeaderSimilarity, strconv.FormatFloat(float64(res.Similarity), 'f', 4, 32))
	}
	h.Set("Age", strconv.Itoa(int(res.Age/time.Second)))
	h[HeaderUpstream] = cacheUpstreamValue
}

// Header values of the answers from upstream, built once (as
// hitExactValue): a miss's outcome, and its first attempts.
var (
	coalescedValue = []string{"true"}
	outcomeValues  = map[string][]string{OutcomeMiss: {OutcomeMiss}, OutcomeBypass: {OutcomeBypass}, OutcomeMissSampled: {OutcomeMissSampled}}
	attemptValues  = [...][]string{nil, {"1"}, {"2"}, {"3"}, {"4"}, {"5"}, {"6"}, {"7"}, {"8"}}
)

// setCallHeaders writes the headers of an answer an upstream call gave: the
// outcome, the target that answered, its attempts, and whether the request
// shared another's call; x's Record takes the target and attempts.
func (x *exchange) setCallHeaders(outcome, target string, attempts int) {
	h := x.w.Header()
	if v, ok := outcomeValues[outcome]; ok {
		h[HeaderCache] = v // shared: net/http only reads it
	} else {
		h.Set(HeaderCache, outcome)
	}
	h.Set(HeaderUpstream, target)
	if attempts > 0 && attempts < len(attemptValues) {
		h[HeaderAttempts] = attemptValues[attempts]
	} else {
		h.Set(HeaderAttempts, strconv.Itoa(attempts))
	}
	if x.rec.Coalesced {
		h[HeaderCoalesced] = coalescedValue
	}
	x.rec.Attempts = attempts
}

// writeCached answers from the cache, rewriting id and created so every
// answer looks like a fresh completion to the client.
func (s *Flow) writeCached(x *exchange, res cache.Result, outcome string) error {
	setHitHeaders(x.w.Header(), &res, outcome)
	x.reuse(&res.Entry)
	x.end(outcome, http.StatusOK, res.Similarity, "")
	if x.format.FreshIDs != nil {
		// Straight from the bytes prepared when it was stored.
		return stored.Of(&res.Entry, x.format).Write(x.w, s.opts.Now())
	}
	return blob(x.w, http.StatusOK, jsonType, x.format.Fresh(res.Entry.Body, s.opts.Now()))
}

// called is one upstream call's answer with what the flow read from it
// once, in the call (which a coalesced flight shares): its usage.
type called struct {
	*upstream.Response
	usage Usage
}

// upstreamRequest is the caller's request for x's miss (or bypass).
func (s *Flow) upstreamRequest(x *exchange, stream bool) *upstream.Request {
	h := x.req.Header
	if stream {
		// The pump may outlive the handler (its followers still listen).
		h = h.Clone()
	}
	ureq := &upstream.Request{
		Path:      x.rec.Endpoint,
		Model:     x.shape.Model,
		Body:      x.body,
		Header:    h,
		RequestID: x.req.Header.Get(HeaderRequestID),
		Class:     x.ctl.class,
		Stream:    stream,
		GenAI:     s.genAIRequest(x.format, stream),
	}
	s.shapeRequest(x.format, x.home, ureq)
	return ureq
}

// shapeRequest lets f adjust the upstream request r built by the flow, and
// sends a model no route lists to f's home upstream.
func (s *Flow) shapeRequest(f Format, home string, r *upstream.Request) {
	r.Upstream = home
	if f.Cost != nil && r.Body != nil {
		r.Cost = f.Cost(r.Body)
		r.Usage = func(body []byte) (int, int, bool) {
			u := f.Usage(body)
			return int(u.Input), int(u.Output), u.Known
		}
	}
	if f.ShapeRequest != nil {
		f.ShapeRequest(r)
	}
	if f.BoundToUpstream != nil {
		if bound, prev := f.BoundToUpstream(r.Body); bound {
			r.SameUpstream = true
			// The upstream that created the previous response, when this
			// process or (Options.SharedOwners) another replica saw it:
			// only that account knows the id.
			r.BindUpstream, _ = s.owners.Lookup(r.Header, prev)
		}
	}
}

// learnOwner remembers the upstream of an answer's response id, for a Format
// whose answers have one. Called once per upstream call (inside the call a
// coalesced flight shares), before the answer reaches any client, so a client
// that sends the id back at once finds it known.
func (s *Flow) learnOwner(h http.Header, f Format, status int, body []byte, upstreamName string) {
	if f.ResponseID == nil || status < 200 || status > 299 {
		return
	}
	s.owners.Add(h, f.ResponseID(body), upstreamName)
}

// missCall is the upstream call of x's miss. It may run on after x's
// handler has returned (for the other waiters of a coalesced flight, or for
// nobody: an answer whose clients all left is still finished by the caller,
// and cached here for the next asker), so it holds nothing of x. It calls,
// then learns from a whole answer (its usage, its id's owner) and writes a
// cacheable one back, before any waiter sees it.
func (s *Flow) missCall(x *exchange, ureq *upstream.Request) func(context.Context) (*called, error) {
	f, key, miss, mayStore, foreign := x.format, x.key, x.miss, x.mayStore, x.foreign
	return func(ctx context.Context) (*called, error) {
		s.calls.Add(1)
		resp, err := s.opts.Caller.Do(ctx, ureq)
		if err != nil {
			return nil, err
		}
		a := &called{Response: resp}
		if resp.Rest != nil {
			return a, nil // relayed as it arrives: nothing to read or keep
		}
		if resp.Status == http.StatusOK {
			a.usage = f.Usage(resp.Body)
		}
		s.learnOwner(ureq.Header, f, resp.Status, resp.Body, resp.Upstream)
		if mayStore && resp.Status == http.StatusOK {
			s.storeBody(context.WithoutCancel(ctx), key, miss, f, resp.Model, resp.Body, a.usage, foreign)
		}
		return a, nil
	}
}

// forward sends a miss (or bypass) upstream, sharing the call with identical
// misses in flight, and writes a cacheable answer back to both tiers.
func (s *Flow) forward(x *exchange, outcome string) error {
	ureq := s.upstreamRequest(x, false)
	// An answer whose clients all left is still worth its price: the next
	// asker gets it from the cache.
	ureq.FinishAbandoned = x.mayStore
	call := s.missCall(x, ureq)
	ctx := x.req.Context()
	var (
		resp   *called
		shared bool
		err    error
	)
	t0 := time.Now()
	if !x.mayStore && outcome == OutcomeBypass {
		resp, err = call(ctx)
	} else {
		// Coalesce on the exact key: identical requests of one tenant.
		resp, shared, err = s.flights.do(ctx, x.key.Exact, call)
		if errors.Is(err, errNotShared) {
			resp, err = call(ctx)
		}
	}
	// Time spent waiting for the upstream (or for the flight it joined), so
	// breakwater_overhead_seconds is what Breakwater itself added.
	x.rec.Upstream = time.Since(t0)
	x.rec.Called, x.rec.Coalesced = !shared, shared
	if resp != nil {
		x.rec.Usage, x.rec.UsageModel = resp.usage, resp.Model
	}
	if x.rec.Called {
		var r *upstream.Response
		if resp != nil {
			r = resp.Response
		}
		s.observeCall(x.format, ureq.Model, r, err, x.rec.Upstream, x.rec.Usage)
	}
	if err != nil {
		return s.upstreamFailed(x, outcome, err, s.writeCached)
	}
	if resp.Rest != nil {
		// Longer than server.max_answer_bytes: relayed, never cached.
		defer resp.Rest.Close()
		s.limit("server.max_answer_bytes")
	}
	s.checkFresh(x, resp.Response)
	x.setCallHeaders(outcome, resp.Target, resp.Attempts)
	x.rec.Tried = resp.Tried
	if shared {
		setTokensSaved(x.w.Header(), x.rec.Usage)
	}
	x.end(outcome, resp.Status, 0, resp.Target)
	return writeAnswer(x.w, resp.Response)
}

// callFailed records the attempts of a call that got no answer to hand
// back.
func (x *exchange) callFailed(err error) {
	var ue *upstream.Error
	if errors.As(err, &ue) {
		x.rec.Attempts, x.rec.Tried = ue.Attempts, ue.Tried
	}
}

// upstreamFailed answers a request whose upstream call failed: nothing when
// the client went away, a stale near match (written by serve, as JSON or as
// a replayed stream) when allowed, else the caller's error.
func (s *Flow) upstreamFailed(x *exchange, outcome string, err error, serve func(*exchange, cache.Result, string) error) error {
	if x.req.Context().Err() != nil {
		// The client went away; nobody is there to answer.
		x.end(outcome, 499, 0, "")
		return nil
	}
	x.callFailed(err) // a stale answer's line says what the call tried too
	if stale, ok := s.staleAnswer(x); ok {
		return serve(x, stale, OutcomeStale)
	}
	x.rec.Failed = true
	x.end(outcome, statusOf(err), 0, "")
	// A miss that failed upstream (502, 429, 503) is still a miss.
	x.w.Header().Set(HeaderCache, outcome)
	return WriteUpstreamError(x.w, x.format, err)
}

// lookup asks the cache for x, with the request's controls, and names the
// outcome of a hit.
func (s *Flow) lookup(x *exchange) (cache.Result, string, bool) {
	res, ok := s.opts.Cache.Lookup(s.lookupContext(x), x.key, cache.LookupOptions{
		Threshold:    x.ctl.threshold,
		MaxAge:       x.ctl.maxAge,
		SkipSemantic: !x.format.Semantic(),
	})
	// The write-back goes through the lookup's handle, which holds its
	// embedding of the question.
	x.miss = res.Miss
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

// storeBody stores a finished completion under key, through the lookup's
// handle miss when there was a lookup; anything that is not a finished
// answer is dropped here. usage is the body's, read once by the caller.
// foreign is the answer of another end user's candidate that the scope
// refused this request (nil: none): when the fresh answer is the same
// answer, the entry is stored as agreed, since two end users' questions
// then drew one answer from the model independently, and other end users
// may be served it.
func (s *Flow) storeBody(ctx context.Context, key cache.Key, miss cache.Miss, f Format, model string, body []byte, usage Usage, foreign []byte) {
	if !f.Finished(body) {
		return
	}
	agreed := foreign != nil && s.sameAnswer(ctx, f.AnswerText(foreign), f.AnswerText(body))
	now := s.opts.Now()
	w := stored.Prepare(body, f, usage) // a hit writes it without a scan
	e := cache.Entry{
		Model:   model,
		Agreed:  agreed,
		Body:    body,
		Wire:    w,
		Created: now,
		Expires: now.Add(s.opts.TTL),
	}
	if miss.Looked() {
		miss.Store(ctx, key, e)
		return
	}
	s.opts.Cache.Store(ctx, key, e)
}

// staleAnswer looks for the nearest cached answer down to StaleThreshold when
// no upstream could answer (degraded mode).
func (s *Flow) staleAnswer(x *exchange) (cache.Result, bool) {
	if !s.opts.StaleIfError || s.opts.Cache == nil {
		return cache.Result{}, false
	}
	return s.opts.Cache.Lookup(x.req.Context(), x.key, cache.LookupOptions{
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
