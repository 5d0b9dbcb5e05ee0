package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/proxy/upstream/breaker"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
	"github.com/breakwater-dev/breakwater/proxy/upstream/outbound"
)

// Caller sends requests upstream with routing, retries, fallbacks, breakers,
// pacing and concurrency limits. It is safe for concurrent use.
type Caller struct {
	retry     RetryPolicy
	check     CheckRetry
	backoff   Backoff
	transport http.RoundTripper
	metrics   *Metrics
	maxAnswer int64 // negative: no limit
	maxStream time.Duration
	log       *slog.Logger
	now       func() time.Time
	rand      func() float64

	bopts  BreakerOptions
	raCap  time.Duration
	seed   func(string) (float64, time.Duration) // Options.Seed
	gate   Gate                                  // Options.Gate
	routes map[string]*route
	order  []*route // config order, for Snapshot
	def    *route   // the default upstream as a one-target route; nil when none
	ups    map[string]*upstream
	models modelTargets
	tracer trace.Tracer // nil: tracing off
}

// Response is an upstream's complete answer: a success, or a 4xx (other than 429)
// passed through unchanged.
type Response struct {
	Status int
	// Header is the upstream's, without hop-by-hop headers and Content-Length.
	Header http.Header
	Body   []byte
	// Rest is nil unless the answer is longer than Options.MaxAnswerBytes:
	// Body then holds its first bytes and Rest the live remainder, which the
	// caller must read and close (the upstream slot is held until then).
	Rest io.ReadCloser
	// Target and Upstream name who answered; Model is the model sent upstream.
	Target, Upstream, Model string
	// Attempts counts the upstream requests this call sent, over all
	// targets; Tried is what the call did at them, its attempts merged.
	Attempts int
	Tried    *Tried
}

// New builds a Caller, applying the documented defaults to zero fields.
func New(opts Options) (*Caller, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Caller{
		retry: opts.Retry.withDefaults(), check: opts.CheckRetry, backoff: opts.Backoff,
		transport: opts.Transport, metrics: opts.Metrics, log: opts.Logger, now: opts.Now, rand: opts.Rand,
		routes: make(map[string]*route, len(opts.Routes)), raCap: opts.Retry.RetryAfterCap, seed: opts.Seed, gate: opts.Gate,
		tracer: tracerOf(opts.TracerProvider),
	}
	if c.raCap <= 0 {
		c.raCap = DefaultRetryAfterCap
	}
	switch {
	case opts.MaxStreamDuration == 0:
		c.maxStream = DefaultMaxStreamDuration
	default:
		c.maxStream = max(opts.MaxStreamDuration, 0)
	}
	switch {
	case opts.MaxAnswerBytes == 0:
		c.maxAnswer = DefaultMaxAnswerBytes
	case opts.MaxAnswerBytes < 0:
		c.maxAnswer = -1
	default:
		c.maxAnswer = opts.MaxAnswerBytes
	}
	if c.check == nil {
		c.check = RetryOnStatus(c.retry.RetryOn)
	}
	if c.backoff == nil {
		c.backoff = DefaultBackoff
	}
	if c.transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 256
		// A status line and headers beyond 1 MiB are no model answer
		// (net/http's own default allows 10 MiB).
		t.MaxResponseHeaderBytes = 1 << 20
		c.transport = t
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.rand == nil {
		c.rand = rand.Float64
	}
	bopts := opts.Breaker.WithDefaults()
	c.bopts = bopts
	ups := make(map[string]*upstream, len(opts.Upstreams))
	for _, u := range opts.Upstreams {
		ups[u.Name] = newUpstream(u, c.metrics)
	}
	c.ups = ups
	targets := make(map[string]*target)
	get := func(tc Target, weight float64) (*target, error) {
		name := targetName(tc)
		if t, ok := targets[name]; ok {
			if t.up.cfg.Name != tc.Upstream || t.model != tc.Model {
				return nil, fmt.Errorf("build target %q: defined twice with different upstream or model", name)
			}
			return t, nil
		}
		t := &target{name: name, model: tc.Model, up: ups[tc.Upstream], breaker: breaker.New(bopts), factor: 1, cfgWeight: weight, c: c}
		t.initLanes()
		targets[name] = t
		c.metrics.Health(name, int(StateClosed), weight)
		return t, nil
	}
	for _, r := range opts.Routes {
		members := make([]*member, 0, len(r.Targets))
		for _, tc := range r.Targets {
			w := tc.Weight
			if w == 0 {
				w = DefaultWeight
			}
			t, err := get(tc, w)
			if err != nil {
				return nil, fmt.Errorf("build route %q: %w", r.Name, err)
			}
			members = append(members, &member{t: t, priority: tc.Priority, weight: w})
		}
		rt := newRoute(r.Name, members)
		c.routes[r.Name] = rt
		c.order = append(c.order, rt)
	}
	if opts.DefaultUpstream != "" {
		t, err := get(Target{Upstream: opts.DefaultUpstream}, 1)
		if err != nil {
			return nil, fmt.Errorf("build default upstream: %w", err)
		}
		c.def = newRoute(DefaultModelName, []*member{{t: t, weight: 1}})
	}
	return c, nil
}

// Do sends a non-streaming request and reads the whole answer. It returns a
// *Response for a success or a non-retryable 4xx, ctx.Err() when the client
// cancelled, and an *Error otherwise.
func (c *Caller) Do(ctx context.Context, req *Request) (*Response, error) {
	a, err := c.run(ctx, req, false)
	if err != nil {
		return nil, err
	}
	r := &Response{
		Status: a.resp.StatusCode, Header: outbound.Inbound(a.resp.Header), Body: a.body,
		Target: a.m.t.name, Upstream: a.m.t.up.cfg.Name, Model: a.model, Attempts: a.attempts, Tried: a.tried,
	}
	if a.finish != nil {
		// Longer than MaxAnswerBytes: Body is its beginning, Rest the rest.
		b := &streamBody{rc: a.resp.Body, cause: a.cause}
		var once sync.Once
		b.finish = func(err error) { once.Do(func() { a.finish(err) }) }
		r.Rest = b
	}
	return r, nil
}

// answer is what run hands back to Do or Open.
type answer struct {
	m        *member
	model    string
	resp     *http.Response
	body     []byte       // the whole body, except for a live stream
	finish   func(error)  // a live stream's (or an over-long body's) end, nil otherwise
	cause    func() error // why a live body's context ended
	attempts int
	tried    *Tried
	used     *streamUsage // a live stream's usage, reported by its reader
}

// call is one request's journey over targets.
type call struct {
	c        *Caller
	req      *Request
	ctx      context.Context // the client's
	dctx     context.Context // ctx bounded by the deadline
	deadline time.Time
	budget   time.Duration
	stream   bool
	rep      report
	// lastResort lets an open breaker admit one attempt at a time: set on the
	// second pass over a route whose every target was skipped as open.
	lastResort bool
	// last is set while the target being tried is the last one the route
	// has: a retry beyond the budget then waits for it instead of falling
	// back.
	last bool
	// cur is the target being tried, nil before the first.
	cur *target
}

func (c *Caller) routeFor(model string) *route {
	if r, ok := c.routes[model]; ok {
		return r
	}
	return c.def
}

func (c *Caller) run(ctx context.Context, req *Request, stream bool) (*answer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := c.routeFor(req.Model)
	if r == nil {
		return nil, &Error{Status: http.StatusNotFound, Code: CodeModelNotFound, Err: ErrUnknownModel,
			Message: fmt.Sprintf("breakwater: the model %q is not configured and there is no default upstream", req.Model)}
	}
	dctx, cancel := context.WithTimeout(ctx, min(c.retry.Deadline, clientTimeout(req.Header)))
	defer cancel()
	deadline, _ := dctx.Deadline()
	k := &call{c: c, req: req, ctx: ctx, dctx: dctx, deadline: deadline, budget: time.Until(deadline),
		stream: stream, rep: report{model: req.Model}}
	groups := r.groups
	var bound *upstream
	if req.BindUpstream != "" {
		bound = c.ups[req.BindUpstream]
	}
	switch {
	case bound != nil:
		groups = k.boundTo(r, bound)
	case r == c.def:
		groups = [][]*member{{c.defaultMember(req.Upstream, req.Model)}}
	case req.SameUpstream:
		groups = k.sameUpstream(groups, groups[0][0].t.up)
	}
	groups = avoidLast(groups, req.Avoid)
	for gi, group := range groups {
		left := slices.Clone(group)
		for len(left) > 0 {
			i := pick(left, c.now(), c.rand, req.Header)
			if i < 0 {
				for _, m := range left {
					k.skipOpen(m.t)
				}
				break
			}
			m := left[i]
			left = slices.Delete(left, i, i+1)
			k.last = gi == len(groups)-1 && len(left) == 0
			if v := k.tryTarget(m); v.fallback == fallNone {
				return v.a, v.err
			}
		}
	}
	if k.rep.attempts == 0 && len(k.rep.shed) == 0 {
		// Every target was skipped as open: an open breaker must not be why a
		// model that still answers some requests answers none. Each target
		// lets one attempt at a time through; its success closes the breaker.
		k.lastResort, k.last = true, false
		for _, group := range groups {
			for _, m := range group {
				if v := k.tryTarget(m); v.fallback == fallNone {
					return v.a, v.err
				}
			}
		}
	}
	if err := k.stopped(); err != nil {
		return nil, err
	}
	return nil, k.rep.exhausted()
}

// Client deadline headers. The Stainless-generated SDKs send their timeout
// in seconds: OpenAI's and Anthropic's Node SDKs as X-Stainless-Timeout,
// their Python SDKs as X-Stainless-Read-Timeout (the read timeout of httpx,
// which bounds the wait for the answer). X-Breakwater-Timeout is ours, for
// any other client: seconds ("8", "2.5") or a Go duration ("8s", "1m30s").
var deadlineHeaders = [...]string{"X-Stainless-Timeout", "X-Stainless-Read-Timeout", "X-Breakwater-Timeout"}

// clientTimeout is how long the app itself waits, the earliest of the
// deadlines its headers state. A little is kept back so that a refusal
// reaches the app before it gives up. It returns the largest duration when
// no header is present and readable.
func clientTimeout(h http.Header) time.Duration {
	best := time.Duration(math.MaxInt64)
	for _, name := range deadlineHeaders {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		if d, ok := parseTimeout(v); ok {
			best = min(best, max(d-d/20, time.Second)) // 5 % margin, at least 1 s
		}
	}
	return best
}

// parseTimeout reads seconds or a Go duration, positive and at most a day.
func parseTimeout(v string) (time.Duration, bool) {
	var d time.Duration
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) || s > 86400 {
			return 0, false
		}
		d = time.Duration(s * float64(time.Second))
	} else if pd, err := time.ParseDuration(v); err == nil {
		d = pd
	}
	return d, d > 0 && d <= 24*time.Hour
}

// sameUpstream keeps the targets of groups on up (for SameUpstream, that of
// the route's first target by priority, then config order), noting the
// others as skipped in the report.
func (k *call) sameUpstream(groups [][]*member, up *upstream) [][]*member {
	kept, others := split(groups, func(m *member) bool { return m.t.up == up })
	for _, m := range others {
		k.rep.note(m.t.name, "not tried (the request is bound to upstream "+up.cfg.Name+")")
	}
	return kept
}

// avoidLast moves the target named avoid behind every other target, so a
// resumed stream goes to the next target first and only comes back to the one
// that cut it when nothing else can serve.
func avoidLast(groups [][]*member, avoid string) [][]*member {
	if avoid == "" {
		return groups
	}
	kept, last := split(groups, func(m *member) bool { return m.t.name != avoid })
	if len(last) > 0 {
		kept = append(kept, last)
	}
	return kept
}

// split keeps in each group, in order, the members keep is true of (a group
// left empty is dropped) and returns the others, in order.
func split(groups [][]*member, keep func(*member) bool) (kept [][]*member, others []*member) {
	kept = make([][]*member, 0, len(groups)+1)
	for _, g := range groups {
		in := make([]*member, 0, len(g))
		for _, m := range g {
			if keep(m) {
				in = append(in, m)
			} else {
				others = append(others, m)
			}
		}
		if len(in) > 0 {
			kept = append(kept, in)
		}
	}
	return kept, others
}

func (k *call) remaining() time.Duration { return time.Until(k.deadline) }

// deadlineErr is the error of a request whose deadline ran out. When the
// provider refused its last attempt, that refusal is the answer (see
// report.exhausted): the request did not go unanswered, it was refused, and
// the client's SDK knows what to do with a 529, 429 or 503 and its
// Retry-After, where a 504 timeout_error says the model never answered.
// Otherwise the target being tried may have answered others while this
// request waited (in its queue, a backoff or a Retry-After hold): the
// deadline is then congestion (429), not a dead upstream (504).
func (k *call) deadlineErr() *Error {
	if k.rep.lastStatus != 0 {
		return k.rep.exhausted()
	}
	if k.rep.attempts == 0 && len(k.rep.shed) > 0 {
		// Never sent: the lane held it for want of room at the model and
		// shed it (see lane.Shed), which is congestion, not a deadline at
		// the model: 429 with the lane's Retry-After (issue 39). A replica
		// that has not had an answer for a while in a fleet still has a
		// model that answers others.
		return k.rep.exhausted()
	}
	if k.cur != nil && (k.cur.answeredWithin(k.c.now(), aliveWindow) || k.cur.refusedWithin(k.c.now(), aliveWindow)) {
		// Up, only not in time for this request: a model that answers
		// others, or that refuses for want of room (a fleet replica that
		// lost its share sends its next request late, and the deadline
		// cuts it), is congested.
		k.rep.alive = true
	}
	return k.rep.deadline(k.budget)
}

// stopped returns the error that ends the call when the client went away or the
// deadline passed, nil otherwise.
func (k *call) stopped() error {
	if err := k.ctx.Err(); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return k.deadlineErr()
	}
	if k.dctx.Err() != nil || k.remaining() <= 0 {
		return k.deadlineErr()
	}
	return nil
}

// waitEnded is why a wait for admission ended without a shed: the client
// gone or the deadline (stopped), else the deadline all the same.
func (k *call) waitEnded() error {
	if err := k.stopped(); err != nil {
		return err
	}
	return k.deadlineErr()
}

func (k *call) skipOpen(t *target) {
	t.shed(ShedBreakerOpen)
	k.rep.tried.Shed(t.name, ShedBreakerOpen)
	state, wait := t.breaker.Snapshot(k.c.now())
	if state == StateOpen {
		k.rep.note(t.name, fmt.Sprintf("circuit open for another %s", wait.Round(time.Second)))
		k.rep.hint(t.name, wait)
		return
	}
	k.rep.note(t.name, "circuit half-open, probes already in flight")
}

// tried is tryTarget's verdict: an answer to hand back (a), an error that
// ends the call (err), or, with fallback set, the reason the call goes on to
// the next target.
type tried struct {
	a        *answer
	err      error
	fallback fallback
}

// fallback is why a call leaves a target for the next one.
type fallback int

const (
	fallNone        fallback = iota // no fallback: an answer or an error
	fallRateLimited                 // the upstream's rate-limit hold outlasts the deadline
	fallBreakerOpen                 // the breaker refused and no probe was free
	fallShed                        // the lane shed the request (see lane.Shed)
	fallPoolShed                    // the class's pool queue was full
	fallFailed                      // the attempt failed and may not be retried here
	fallRetryBudget                 // a congestion retry found the retry budget spent
	fallWaitBeyond                  // the next backoff or Retry-After outlasts the deadline
	fallAttempts                    // every attempt at the target was spent
	fallStopped                     // a stop found no error to end the call with
)

func answered(a *answer) tried { return tried{a: a} }

// stop ends the call with err; with none (the context's error gone by the
// time it was read) the call goes on to the next target.
func stop(err error) tried {
	if err == nil {
		return tried{fallback: fallStopped}
	}
	return tried{err: err}
}
func fallBack(why fallback) tried { return tried{fallback: why} }

// tryTarget makes up to MaxAttempts attempts at one target. Its verdict is
// an answer to hand back, an error that ends the call, or the reason the call
// falls back to the next target.
func (k *call) tryTarget(m *member) tried {
	c, t := k.c, m.t
	body, path := k.req.Body, k.req.Path
	model := k.req.Model
	if t.model != "" && t.model != k.req.Model {
		model = t.model
		switch {
		case k.req.ForModel != nil:
			path, body = k.req.ForModel(t.model)
		case body != nil:
			body = outbound.RewriteModel(body, t.model)
		}
	}
	k.cur = t
	key := laneKey(k.req.Header, t.up.cfg)
	l := t.laneFor(key)
	// The request is on the lane until it leaves the target, a live answer
	// until its body ends (see lane.present).
	l.Enter()
	live := false
	defer func() {
		if !live {
			l.Exit()
		}
	}()
	if t.answeredWithin(c.now(), aliveWindow) {
		k.rep.alive = true
	}
	x := &exchange{
		m: m, pool: t.up.pool(k.req.Class), lane: l, method: k.req.method(), body: body,
		url:    outbound.URL(t.up.cfg.BaseURL, path),
		header: outboundHeader(k.req.Header, t.up.cfg, k.req.RequestID, body != nil),
		base:   c.log, reqID: k.req.RequestID, target: t.name,
	}
	// retried: the next attempt is a retry, and goes ahead of first
	// attempts; budgeted: it retries a congestion refusal, and spends the
	// lane's retry budget (retrying breakage is bounded by the breaker).
	retried, budgeted := false, false
	for n := 1; n <= c.retry.MaxAttempts; n++ {
		if err := k.stopped(); err != nil {
			return stop(err)
		}
		x.startAttempt(k.rep.attempts + 1)
		// A lone lane's burst waits out the hold in the lane's queue, so it
		// goes with the retries it came with when the hold ends (see
		// lane.lone); waiting outside, it reached the lane just after their
		// next refusal, and the next hold: a second lost for nothing.
		if wait := l.Wait(c.now()); wait > 0 && (wait >= k.remaining() || !l.WaitsInQueue()) {
			if wait >= k.remaining() {
				k.shed(t, ShedRateLimited, wait, fmt.Sprintf(
					"breakwater: the upstream's rate limit holds %s back for another %s, beyond the deadline; retry after %s",
					t.name, wait.Round(time.Millisecond), atLeastSecond(wait)))
				return fallBack(fallRateLimited)
			}
			x.log().Debug("upstream paced", "wait", wait)
			if !sleep(k.dctx, wait) {
				return stop(k.stopped())
			}
		}
		probe, ok := t.breaker.Allow(c.now())
		if !ok {
			if !k.lastResort || !t.breaker.AllowLastResort(c.now()) {
				k.skipOpen(t)
				return fallBack(fallBreakerOpen)
			}
			probe = lastResort
		}
		qstart := time.Now()
		rank, deadline := lane.ClassRank(k.req.Class, retried), k.deadline
		if k.req.Short {
			// Ahead of full requests, and measured against its own deadline:
			// the lane sheds a request whose expected wait plus a full
			// answer's time exceed what is left, and a short answer takes
			// a fraction of that time.
			rank, deadline = min(rank, lane.ClassRank("interactive", false)), deadline.Add(2*l.ServiceTime())
		}
		err := l.AcquireCost(k.dctx, rank, budgeted, k.last, deadline, k.req.Cost)
		var big *lane.TooLarge
		if errors.As(err, &big) {
			// It can never fit this target's budget: answered at once, never
			// queued, retried or sent elsewhere (another target's budget
			// would have to be learnt by refusing it too).
			t.breaker.Report(c.now(), probe, neutral)
			t.shed(ShedTooLarge)
			k.rep.tried.Shed(t.name, ShedTooLarge)
			return stop(&Error{Status: http.StatusRequestEntityTooLarge, Code: CodeRequestTooLarge, Message: big.Error(),
				Attempts: k.rep.attempts, Tried: &k.rep.tried, Err: big})
		}
		if err != nil {
			k.traceQueue(t, qstart, err)
			t.breaker.Report(c.now(), probe, neutral)
			var shed *lane.Shed
			if !errors.As(err, &shed) {
				return stop(k.waitEnded())
			}
			k.shed(t, shed.Reason, shed.RetryAfter, shed.Error())
			if x.base.Enabled(k.ctx, slog.LevelDebug) { // the access log's line says it at Info (Tried)
				x.log().Debug("upstream shed", "reason", shed.Reason, "waiting", shed.Waiting, "slots", shed.Slots, "retry_after", shed.RetryAfter)
			}
			return fallBack(fallShed)
		}
		err = x.pool.Acquire(k.dctx)
		k.traceQueue(t, qstart, err)
		if err != nil {
			l.Release()
			t.breaker.Report(c.now(), probe, neutral)
			var shed *lane.PoolShed
			if !errors.As(err, &shed) {
				return stop(k.waitEnded())
			}
			k.shed(t, ShedQueueFull, lane.ShedRetryAfter, shed.Error())
			if x.base.Enabled(k.ctx, slog.LevelDebug) {
				x.log().Debug("upstream shed", "pool", shed.Pool, "waiting", shed.Waiting, "inflight", shed.Inflight)
			}
			return fallBack(fallPoolShed)
		}
		if x.gate, err = k.gate(t, l, key, rank, deadline); err != nil {
			x.pool.Release()
			l.Release()
			t.breaker.Report(c.now(), probe, neutral)
			if err := k.stopped(); err != nil {
				return stop(err)
			}
			wait := max(l.ServiceTime(), lane.ShedRetryAfter)
			k.shed(t, ShedQueueTimeout, wait, fmt.Sprintf(
				"breakwater: %s is at capacity across the fleet: the request waited for the fleet's capacity gate until no answer could arrive within the deadline; retry after %s",
				t.name, atLeastSecond(wait)))
			return fallBack(fallShed)
		}
		x.probe = probe
		r := k.send(x)
		k.rep.tried.Add(r.step(t.name), r.sent, time.Now())
		switch {
		case r.out == outCanceled:
			return stop(k.ctx.Err())
		case r.deadline:
			return stop(k.deadlineErr())
		case !r.retry && r.err == nil && !r.refusal:
			if f := r.finish; f != nil {
				live = true
				var once sync.Once
				r.finish = func(err error) { f(err); once.Do(l.Exit) }
			}
			return answered(&answer{m: m, model: model, resp: r.resp, body: r.body, finish: r.finish, cause: r.cause, attempts: k.rep.attempts, tried: &k.rep.tried, used: r.used})
		}
		k.rep.note(t.name, r.describe())
		k.rep.lastStatus, k.rep.lastErr = 0, r.err
		k.rep.congested = r.congestion && t.answeredWithin(c.now(), aliveWindow)
		if r.err == nil {
			k.rep.lastStatus, k.rep.lastErr = r.resp.StatusCode, &StatusError{Status: r.resp.StatusCode}
		}
		if r.hold > 0 {
			k.rep.hint(t.name, r.hold) // the lane is held already (holdLane)
		}
		if !r.retry || r.noRetry || n == c.retry.MaxAttempts {
			return fallBack(fallFailed)
		}
		if r.congestion && !k.last && !l.RetryBudget() {
			// Spent: another target may take the request now; the last one
			// waits for the budget in its queue.
			k.shed(t, ShedRetryBudget, lane.ShedRetryAfter, (&lane.Shed{Target: t.name, Reason: ShedRetryBudget}).Error())
			return fallBack(fallRetryBudget)
		}
		wait := max(c.backoff(n, c.retry.BaseDelay, c.retry.MaxDelay, r.resp), l.Wait(c.now()))
		if r.hold > 0 {
			wait = max(min(wait, c.raCap), r.hold)
		}
		if wait >= k.remaining() {
			// a wait that does not fit the deadline skips the target at once.
			what := "next backoff"
			if r.hold > 0 {
				what = "asked to wait"
			}
			k.rep.note(t.name, fmt.Sprintf("%s %s, beyond the deadline", what, wait.Round(time.Millisecond)))
			return fallBack(fallWaitBeyond)
		}
		c.metrics.Retry(t.name, r.reason)
		if x.base.Enabled(k.ctx, slog.LevelDebug) { // the access log's line says it at Info (Tried)
			x.log().Debug("upstream retry", "reason", r.reason, "wait", wait)
		}
		if !sleep(k.dctx, wait) {
			return stop(k.stopped())
		}
		retried, budgeted = true, r.congestion
	}
	return fallBack(fallAttempts)
}

// gate waits for the fleet's capacity gate (Options.Gate) to admit an
// attempt that l, t's lane of the forwarded key (its hash; "" for the
// sidecar's own key), admitted: until an answer could no longer arrive
// before deadline. Each lane has its own gate, as the upstream limits each
// key on its own. With a lease, l's limit is capped at this replica's
// share of the gate (Gate.Share). It returns the lease's release (nil
// without a gate, or when the gate let the attempt go without a lease), or
// an error when the wait ran out.
func (k *call) gate(t *target, l *lane.Lane, key string, rank int, deadline time.Time) (func(lane.Outcome, bool), error) {
	if k.c.gate == nil {
		return nil, nil
	}
	name := t.name
	if key != "" {
		name += "#" + key
	}
	release, err := k.c.gate.Acquire(k.dctx, name, rank, deadline.Add(-l.ServiceTime()))
	if release != nil {
		l.Cap(k.c.gate.Share(name))
	}
	return release, err
}

// aliveWindow is how recent a target's last answer must be for its refusals
// to count as congestion in the status the app gets (429, retry later) rather
// than the upstream's own (503 for a model that answers nothing).
const aliveWindow = 30 * time.Second

// shed records a request refused before it reached t.
func (k *call) shed(t *target, reason string, retryAfter time.Duration, msg string) {
	t.shed(reason)
	k.rep.tried.Shed(t.name, reason)
	k.rep.note(t.name, "shed: "+reason)
	k.rep.shed = append(k.rep.shed, msg)
	k.rep.hint(t.name, retryAfter)
}

// settle records an attempt's outcome in the counters and its verdict in the
// breaker and the weight.
func (c *Caller) settle(t *target, probe probeKind, o outcome, v verdict, d time.Duration, log func() *slog.Logger) {
	t.stats.count(o)
	switch o {
	case outSuccess:
		t.lastOK.Store(c.now().UnixNano())
	case outRateLimited, outOverloaded:
		t.lastRefused.Store(c.now().UnixNano())
	}
	switch o {
	case outCanceled:
	case outShed: // never sent: no duration
		c.metrics.Attempt(t.name, o.String(), 0)
	default:
		c.metrics.Attempt(t.name, o.String(), d)
	}
	if d > 0 && o != outCanceled && o != outConnError {
		t.stats.latency(d)
	}
	state, changed := t.breaker.Report(c.now(), probe, v)
	f := t.adjust(v)
	c.metrics.Health(t.name, int(state), t.cfgWeight*f)
	if changed {
		log().Info("upstream breaker "+state.String(), "outcome", o.String())
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// bodyReader gives each attempt its own reader over the same bytes.
func bodyReader(b []byte) io.Reader {
	if b == nil {
		return nil
	}
	return bytes.NewReader(b)
}
