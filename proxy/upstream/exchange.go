package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// exchange is what every attempt to one target shares: the same method, URL,
// headers and body bytes.
type exchange struct {
	m      *member
	pool   *lane.Pool
	lane   *lane.Lane
	method string
	url    string
	header http.Header
	body   []byte
	probe  probeKind
	// gate is the attempt's lease from the fleet's capacity gate
	// (Options.Gate), released with the lane's slot; nil: none.
	gate func(lane.Outcome, bool)
	// The attempt's logger is built on its first line: most attempts write
	// none (slog's With copies its attributes, 1.3 % of a miss's CPU).
	base     *slog.Logger
	reqID    string
	attempt  int
	target   string
	attemptL *slog.Logger
}

// startAttempt names the attempt the next lines are about.
func (x *exchange) startAttempt(n int) {
	x.attempt, x.attemptL = n, nil
}

// log is the attempt's logger.
func (x *exchange) log() *slog.Logger {
	if x.attemptL == nil {
		x.attemptL = x.base.With("request_id", x.reqID, "attempt", x.attempt, "target", x.target)
	}
	return x.attemptL
}

// result is one attempt's outcome.
type result struct {
	resp     *http.Response
	body     []byte
	err      error
	out      outcome
	retry    bool
	reason   string
	deadline bool         // the request deadline cut the attempt
	finish   func(error)  // a live stream's (or an over-long body's) end; resp.Body is open
	cause    func() error // why the live body's context ended, if it did
	// congestion marks backpressure (see classifyAnswer); retryAfter,
	// noRetry and why are the wire format's reading of the body.
	congestion bool
	retryAfter time.Duration
	noRetry    bool
	why        string
	refusal    bool      // a non-2xx that must not be passed through: fall back instead
	tooLarge   bool      // the provider said the request alone exceeds its limit: passed through, never retried
	limit      string    // the limit a congestion refusal hit (Limit…), "" otherwise
	sent       time.Time // when the attempt was sent
	// used is a live stream's usage, which its reader reports before the
	// stream ends (StreamResponse.Usage); nil for other answers.
	used *streamUsage
	// hold is the Retry-After (header or body) that now holds the lane; 0
	// when the answer named none.
	hold time.Duration
}

// errDeadline is the cause of an attempt cut by the request deadline.
var errDeadline = errors.New("request deadline reached")

// attemptTimeout is the cause of an attempt cut by Upstream.Timeout; it is a
// timeout, so CheckRetry retries it.
type attemptTimeout struct{ after time.Duration }

func (e *attemptTimeout) Error() string { return fmt.Sprintf("attempt timed out after %s", e.after) }
func (e *attemptTimeout) Timeout() bool { return true }

// maxErrorBody bounds how much of a non-2xx streaming answer is read.
const maxErrorBody = 1 << 20

// send makes one attempt holding a pool slot, which it releases (at once, or at
// the end of a live stream), and settles the outcome.
func (k *call) send(x *exchange) result {
	c, t := k.c, x.m.t
	// Attempts hang off the client's context, not the deadline's: a live stream
	// must outlive run. The timer enforces the deadline and Upstream.Timeout until
	// the answer (Do) or its headers (Open) arrive. With FinishAbandoned a
	// non-stream attempt is not cut when its client goes away (see Request).
	parent := k.ctx
	if !k.stream && k.req.FinishAbandoned {
		parent = context.WithoutCancel(k.ctx)
	}
	actx, cancel := context.WithCancelCause(parent)
	limit, cause := k.remaining(), error(errDeadline)
	if to := t.up.cfg.Timeout; to > 0 && to < limit {
		limit, cause = to, &attemptTimeout{after: to}
	}
	timer := time.AfterFunc(limit, func() { cancel(cause) })
	start := time.Now()
	release := func(v verdict, o outcome) {
		timer.Stop()
		cancel(nil)
		t.stats.inflight.Add(-1)
		x.pool.Release()
		lo := laneOutcome(v)
		switch {
		case o == outCanceled:
			x.lane.Abandon(start)
		case k.req.Short && v != congested:
			x.lane.Release() // a few tokens say nothing of a full answer's time
			lo = lane.Other
		case lo == lane.Congested && x.gate != nil:
			// The fleet's gate admitted it and learns the refusal: the
			// lane returns the slot without a cut (its Retry-After hold
			// stands). Cut as well, the refused replica's lane held back
			// what the gate would grant it for the rest of a peak (3
			// replicas: 52 answers against 86 and 86; 6: 24 against 40).
			x.lane.Done(start, time.Since(start), lane.Other)
		default:
			x.lane.Done(start, time.Since(start), lo)
		}
		if x.gate != nil {
			x.gate(lo, o == outCanceled)
			x.gate = nil
		}
	}

	span := k.startAttempt(x) // nil: tracing off
	k.rep.attempts++
	t.stats.sent.Add(1)
	t.stats.inflight.Add(1)
	r := result{sent: start}
	hreq, err := http.NewRequestWithContext(actx, x.method, x.url, bodyReader(x.body))
	if err == nil {
		hreq.Header = x.header
		r.resp, err = c.transport.RoundTrip(hreq)
	}
	live := k.stream && err == nil && r.resp.StatusCode/100 == 2
	over := false // a non-stream body longer than MaxAnswerBytes, still open
	if err == nil && !live {
		limit := c.maxAnswer
		if k.stream {
			limit = maxErrorBody
		}
		r.body, over, err = readCapped(r.resp.Body, limit, r.resp.ContentLength)
		if over && k.stream {
			// A 4xx to a stream: its first MiB says enough.
			r.body, over = r.body[:limit], false
		}
		if !over {
			r.resp.Body.Close()
		}
	}
	dur := time.Since(start)
	if err == nil && k.ctx.Err() != nil {
		t.abandoned() // answered after its client went away
	}
	if r.resp != nil && err == nil {
		x.lane.Observe(c.now(), start, r.resp.Header, c.raCap)
	}
	if err != nil {
		// A body that broke off is a failed attempt, whatever the status said.
		r.resp, r.body = nil, nil
		switch ctxErr := k.ctx.Err(); {
		case errors.Is(ctxErr, context.Canceled):
			err, r.out = ctxErr, outCanceled
		case ctxErr != nil || errors.Is(context.Cause(actx), errDeadline):
			err, r.out, r.deadline = context.DeadlineExceeded, outTimeout, true
		default:
			var at *attemptTimeout
			if errors.As(context.Cause(actx), &at) {
				err = at
			}
		}
	}
	r.err = err
	v := neutral
	if r.out != outCanceled && !r.deadline {
		status := 0
		if r.resp != nil {
			status = r.resp.StatusCode
		}
		r.out = classify(status, err)
		r.retry, r.reason = c.check(r.resp, err)
		if err == nil && status >= 400 {
			cv := classifyAnswer(status, r.resp.Header, r.body, k.req.Classify)
			r.congestion, r.retryAfter, r.noRetry, r.why = cv.Congestion, cv.RetryAfter, cv.NoRetrySameTarget, cv.Reason
			r.retry = shouldRetry(r.resp.Header, r.retry)
			r.refusal = r.noRetry
			if r.congestion {
				r.limitHit(x, status, k.req.Cost)
			}
		}
		switch {
		case r.congestion:
			if r.out != outRateLimited {
				r.out = outOverloaded
			}
			v = congested
		case r.retry && r.out == outClientError:
			r.out = outServerError // a status the operator chose to retry (e.g. 408)
			v = failure
		case r.retry, err != nil:
			v = failure
		case r.out == outSuccess:
			v = success
		}
	}
	if x.base.Enabled(k.ctx, slog.LevelDebug) { // the arguments cost allocations even when off
		x.log().Debug("upstream attempt", "status", statusOf(r.resp), "outcome", r.out.String(),
			"reason", r.reason, "duration", dur, "error", errString(err))
	}
	if over && (r.retry || err != nil) {
		r.resp.Body.Close() // retried or failed: the rest is not needed
		over = false
	}
	if live || over {
		// The body outlives this call: the request deadline keeps running
		// over it (Upstream.Timeout bounded only the wait for headers), so
		// neither an endless stream nor an endless body outlives it. A
		// stream may run on to MaxStreamDuration from the request's start.
		left := k.remaining()
		if live {
			left = max(left, time.Until(k.deadline.Add(c.maxStream-k.budget)))
		}
		timer.Stop()
		timer = time.AfterFunc(left, func() { cancel(errDeadline) })
		r.cause = func() error { return context.Cause(actx) }
		status := r.out // what the headers said (a long 4xx stays a client error)
		if live && k.req.Usage != nil {
			r.used = &streamUsage{}
		}
		var once sync.Once
		r.finish = func(ferr error) {
			once.Do(func() {
				o := streamOutcome(k.ctx, ferr)
				if o == outSuccess && over {
					o = status
				}
				if in, out, ok := r.used.get(); ok && (o == outSuccess || o == outCanceled) {
					// The stream's own usage (its final usage chunk,
					// message_delta or usageMetadata) corrects the charge,
					// as a JSON answer's does below. It is reported only for
					// a complete answer, also one whose client left after
					// its last event (canceled).
					x.lane.Reconcile(k.req.Cost, in, out)
				}
				release(o.verdict(), o)
				k.endAttempt(span, &r, ferr)
				r.resp.Body.Close()
				c.settle(t, x.probe, o, o.verdict(), dur, x.log)
			})
		}
		return r
	}
	if r.resp != nil && r.resp.StatusCode >= 400 && !r.tooLarge {
		r.holdLane(x.lane, c)
	}
	if v == success && k.req.Usage != nil {
		if in, out, ok := k.req.Usage(r.body); ok {
			x.lane.Reconcile(k.req.Cost, in, out)
		}
	}
	lv := v
	var at *attemptTimeout
	if errors.As(r.err, &at) {
		// The upstream's own timeout: one too slow to answer in time is full,
		// whatever else it is. A cut by the request's deadline says nothing
		// about the upstream: the request came late.
		lv = congested
	}
	release(lv, r.out)
	k.endAttempt(span, &r, nil)
	c.settle(t, x.probe, r.out, v, dur, x.log)
	return r
}

// limitHit reads which limit a congestion refusal hit: it counts it by
// limit, and tells the lane's token budgets. A request too large for the
// limit ("Request too large", which can never succeed) is no congestion: the
// provider's answer is handed to the client as it is, never retried or sent
// elsewhere, and it holds nobody back.
func (r *result) limitHit(x *exchange, status int, cost Cost) {
	rf := lane.ClassifyRefusal(status, r.resp.Header, r.body)
	r.limit = rf.Limit
	x.m.t.refused(rf.Limit)
	x.lane.RefusedOn(rf.Limit, rf.PerMinute, rf.Used, cost)
	if rf.TooLarge {
		r.congestion, r.retry, r.refusal, r.tooLarge = false, false, false, true
	}
}

// holdLane holds every request of the lane for the answer's Retry-After,
// not just this one (RFC 9110 §10.2.3): the server said when it can take
// more, and a fleet of sidecars that each let their other queued requests
// through would refuse that many more. It runs before the attempt's slot is
// released, so the release does not hand the slot to a queued request that
// the model would refuse at once.
func (r *result) holdLane(l *lane.Lane, c *Caller) {
	ra, hinted := RetryAfter(r.resp, time.Now())
	if r.retryAfter > 0 {
		ra, hinted = max(ra, r.retryAfter), true
	}
	if !hinted {
		return
	}
	r.hold = min(ra, c.raCap)
	if r.limit == LimitConcurrency {
		l.Clock(c.now().Add(r.hold))
		return
	}
	l.Hold(c.now().Add(r.hold))
}

func streamOutcome(ctx context.Context, err error) outcome {
	switch {
	case err == nil:
		return outSuccess
	case errors.Is(err, ErrDeadline):
		// The request's own budget ran out, not the upstream.
		return outCanceled
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return outCanceled
	case isTimeout(err):
		return outTimeout
	}
	return outConnError
}

// describe says in a few words what an attempt got, for the final error message.
func (r *result) describe() string {
	if r.err == nil {
		s := "answered " + strconv.Itoa(r.resp.StatusCode)
		if r.why != "" {
			s += " (" + r.why + ")"
		}
		return s
	}
	switch r.reason {
	case "timeout":
		return r.err.Error()
	case "conn_refused":
		return "connection refused"
	case "conn_reset":
		return "connection reset"
	}
	return "error: " + r.err.Error()
}

func statusOf(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ReadSized is io.ReadAll with the buffer sized from a known length (a
// Content-Length; -1 when unknown): one allocation and no copies for the
// usual JSON body, where io.ReadAll grows from 512 bytes. The length is a
// hint; the reader decides where the body ends. The proxy reads request
// bodies with it too.
func ReadSized(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size > 64<<20 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1) // +1: room to see EOF without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// laneOutcome is what a verdict tells the attempt's lane.
func laneOutcome(v verdict) lane.Outcome {
	switch v {
	case success:
		return lane.Answered
	case congested:
		return lane.Congested
	}
	return lane.Other
}
