package flow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// streamJob is what the pump of one upstream stream needs. It is copied out
// of the request because the pump may outlive the leader's handler (its
// followers still listen), and the server reuses a request's state after
// its handler ends.
type streamJob struct {
	req      *upstream.Request
	key      cache.Key
	miss     cache.Miss // exchange.miss
	format   Format
	mayStore bool
	probe    *probe // the live false-hit estimate's, compared when the stream ends
	foreign  []byte // exchange.foreign
	log      logFn
	// start is when the pump called the upstream; first is set once the
	// first chunk was relayed (time to first chunk).
	start time.Time
	first bool
	// assembled is the answer the assembler built when the stream ended
	// cleanly (didAssemble), built once for the caller and the cache.
	assembled   []byte
	assembleErr error
	didAssemble bool
}

type logFn func(msg string, args ...any)

func (s *Flow) newStreamJob(x *exchange) *streamJob {
	return &streamJob{
		req:      s.upstreamRequest(x, true),
		key:      x.key,
		miss:     x.miss,
		format:   x.format,
		mayStore: x.mayStore,
		probe:    x.probe,
		foreign:  x.foreign,
		log:      x.logger().Warn,
	}
}

// streamMiss answers a stream: true miss or bypass: the upstream stream is
// relayed as it arrives (followers of the same question share it),
// assembled on the way and written back when it finished cleanly.
func (s *Flow) streamMiss(x *exchange, outcome string) error {
	ctx := x.req.Context()
	job := s.newStreamJob(x)
	var b *broadcast
	if x.mayStore {
		var pctx context.Context
		var leader bool
		b, pctx, leader = s.sflights.join(ctx, x.key.Exact)
		defer s.sflights.leave(x.key.Exact, b)
		if leader {
			x.rec.Called = true
			s.pumps.Add(1)
			go s.pump(pctx, job, b, func() { s.sflights.done(x.key.Exact, b) })
		} else {
			x.rec.Coalesced = true
		}
	} else {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		b = newBroadcast(cancel)
		x.rec.Called = true
		s.pumps.Add(1)
		go s.pump(pctx, job, b, func() {})
	}
	return s.relay(x, b, outcome)
}

// relay writes a broadcast to one client as it arrives.
func (s *Flow) relay(x *exchange, b *broadcast, outcome string) error {
	ctx := x.req.Context()
	if err := b.waitStart(ctx); err != nil {
		return s.upstreamFailed(x, outcome, err, s.replayHit)
	}
	w := x.w
	h := w.Header()
	x.setCallHeaders(outcome, b.target, b.attempts)
	x.rec.Tried = b.tried
	if b.status != http.StatusOK {
		// An upstream 4xx: passed through whole, never cached.
		if ct := b.header.Get("Content-Type"); ct != "" {
			h.Set("Content-Type", ct)
		}
		w.WriteHeader(b.status)
		for i := 0; ; {
			evs, more, err := b.read(ctx, i)
			for _, ev := range evs {
				_, _ = w.Write(ev)
			}
			i += len(evs)
			if !more || err != nil {
				break
			}
		}
		x.end(outcome, b.status, 0, b.target)
		return nil
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush(w)
	status := http.StatusOK
	for i := 0; ; {
		evs, more, err := b.read(ctx, i)
		for _, ev := range evs {
			if _, werr := w.Write(ev); werr != nil {
				err = werr
				break
			}
		}
		flush(w)
		i += len(evs)
		if err != nil {
			status = 499
			break
		}
		if !more {
			break
		}
	}
	if status == http.StatusOK {
		x.rec.Usage, x.rec.UsageModel = b.usageOf()
	}
	x.end(outcome, status, 0, b.target)
	return nil
}

// replayHit sends a cached completion as an SSE stream.
func (s *Flow) replayHit(x *exchange, res cache.Result, outcome string) error {
	w := x.w
	h := w.Header()
	setHitHeaders(h, &res, outcome)
	x.reuse(&res.Entry)
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	var err error
	fl := func() { flush(w) }
	if r := x.format.FreshIDs; r != nil {
		err = s.renders.Replay(w, fl, &res.Entry, r, x.shape.IncludeUsage, s.opts.Now())
	} else {
		err = x.format.Replay(w, fl, res.Entry.Body, x.body, s.opts.Now())
	}
	status := http.StatusOK
	if err != nil {
		status = 499
		x.logger().Warn("replay cached stream", "err", err)
	}
	x.end(outcome, status, res.Similarity, "")
	return nil
}

// pump reads one upstream stream into b, resuming a cut stream on the next
// target when it can, and writes a cleanly finished stream back to the cache.
func (s *Flow) pump(ctx context.Context, job *streamJob, b *broadcast, done func()) {
	defer s.pumps.Add(-1)
	defer done()
	s.calls.Add(1)
	job.start = time.Now()
	sr, err := s.opts.Caller.Open(ctx, job.req)
	if err != nil {
		s.observeCall(job.format, job.req.Model, nil, err, time.Since(job.start), Usage{})
		b.finish(err)
		return
	}
	b.start(sr.Status, sr.Header.Clone(), sr.Target, sr.Attempts, sr.Tried)
	if sr.Status != http.StatusOK {
		body, rerr := io.ReadAll(io.LimitReader(sr.Body, 1<<20))
		sr.Body.Close()
		sr.Done(nil)
		if len(body) > 0 {
			b.append(body)
		}
		b.finish(rerr)
		return
	}
	asm := job.format.NewAssembler()
	cut := s.copyStream(sr, b, asm, false, job)
	model := sr.Model
	// A stream that was cut is never cached, even when resumed: the
	// continuation came from another request and may not read as one answer.
	wasCut := cut != nil
	// Each client listening brings its own MaxResumes: a stream shared by n
	// clients may be resumed up to n × MaxResumes times, one at a time, so
	// one unlucky run of cuts does not reach every follower at once. That is
	// no more upstream calls than the n clients' own streams could have made.
	for resumes := 0; cut != nil && resumable(cut) && s.opts.Resume && ctx.Err() == nil && resumes < s.opts.MaxResumes*b.listeners(); resumes++ {
		if job.format.Resume == nil {
			break
		}
		rbody, err := job.format.Resume(job.req.Body, asm)
		if err != nil {
			break
		}
		job.log("stream cut; resuming on the next target", "target", sr.Target, "err", cut.Error(), "resume", resumes+1)
		rreq := *job.req
		rreq.Body = rbody
		if job.format.ShapeRequest != nil {
			job.format.ShapeRequest(&rreq)
		}
		rreq.Avoid = sr.Target
		next, err := s.opts.Caller.Open(ctx, &rreq)
		if err != nil {
			cut = fmt.Errorf("%w; resume failed: %v", cut, err)
			break
		}
		if next.Status != http.StatusOK {
			next.Body.Close()
			next.Done(nil)
			cut = fmt.Errorf("%w; resume answered %d", cut, next.Status)
			break
		}
		sr = next
		cut = s.copyStream(sr, b, asm, true, job)
	}
	if cut != nil {
		if h := s.opts.Hooks.Call; h != nil {
			h(job.format, model, time.Since(job.start), "stream_cut", Usage{})
		}
		// Never end a cut stream as if it had finished, never cache it.
		job.log("stream cut", "target", sr.Target, "err", cut.Error())
		if l := limitOf(cut); l != "" {
			s.limit(l)
		}
		b.append(job.format.StreamError(cut))
		b.finish(nil)
		return
	}
	if job.format.Trailer != nil {
		if t := job.format.Trailer(asm); t != nil {
			b.append(t)
		}
	}
	if wasCut || !asm.Complete() {
		b.finish(nil)
		return
	}
	// The usage is read from the assembled answer, in the API's own shape,
	// before the followers are told the stream ended: each counts it.
	body, err := job.assembled, job.assembleErr
	if !job.didAssemble {
		body, err = asm.Body()
	}
	var u Usage
	if err == nil {
		u = job.format.Usage(body)
	}
	b.finishUsage(u, model)
	if h := s.opts.Hooks.Call; h != nil {
		h(job.format, model, time.Since(job.start), "", u)
	}
	if job.mayStore || job.probe != nil {
		if err == nil && job.mayStore {
			s.storeBody(context.WithoutCancel(ctx), job.key, job.miss, job.format, model, body, u, job.foreign)
		}
		if err == nil && job.probe != nil {
			s.compareFresh(context.WithoutCancel(ctx), job.format, job.probe, body)
		}
	}
}

var errIdle = errors.New("the upstream stream stalled beyond stream.idle_timeout")

// copyStream copies one upstream stream's events into b and the assembler,
// which says what to relay. It returns nil when the stream finished cleanly,
// else why it was cut.
func (s *Flow) copyStream(sr *upstream.StreamResponse, b *broadcast, asm StreamAssembler, resumed bool, job *streamJob) (cut error) {
	body := newIdleBody(sr.Body, s.opts.IdleTimeout)
	defer func() {
		// The answer's usage goes to the caller before the body is closed
		// (which ends the attempt): it corrects the lane's token budgets,
		// and with tracing on the attempt's span records it. So it does
		// when the last listener left after every event came, before the
		// upstream's end was read: the provider bills the whole answer
		// (not stored: the stream was cut). A resumed stream's usage is
		// the continuation's or both parts': the estimate stands.
		left := cut != nil && errors.Is(cut, context.Canceled) && !resumed
		if (cut == nil || left) && asm.Complete() {
			assembled, err := asm.Body()
			if cut == nil {
				job.assembled, job.assembleErr, job.didAssemble = assembled, err, true
			}
			if err == nil {
				u := job.format.Usage(assembled)
				if u.Known && !resumed {
					sr.Usage(int(u.Input), int(u.Output))
				}
				if tok := job.req.GenAI.Stream; tok != nil && cut == nil {
					*tok = upstream.Tokens{Input: u.Input, Output: u.Output, Model: responseModel(assembled), Known: u.Known}
				}
			}
		}
		body.Close()
		sr.Done(cut)
	}()
	rd := newBoundedSSEReader(body, s.opts.MaxEventBytes)
	// A stream whose response has an id the provider keeps: its upstream is
	// remembered as soon as the id is read, before the event that carries
	// it is relayed.
	idr := job.format.StreamResponseID
	for {
		ev, raw, err := rd.next()
		if errors.Is(err, io.EOF) {
			if asm.FinishedAtEOF() {
				return nil
			}
			return errors.New("the upstream closed the stream before it finished")
		}
		if err != nil {
			if body.idle.Load() {
				return errIdle
			}
			if errors.Is(err, errEventTooLarge) || errors.Is(err, upstream.ErrDeadline) {
				return err
			}
			return fmt.Errorf("read upstream stream: %w", err)
		}
		out, end, err := asm.Feed(ev, raw, resumed)
		if err != nil {
			return err
		}
		if idr != nil {
			if id := idr(asm); id != "" {
				s.owners.Add(job.req.Header, id, sr.Upstream)
				idr = nil
			}
		}
		if out != nil {
			if s.opts.MaxStreamBytes > 0 && b.bytes()+int64(len(out)) > s.opts.MaxStreamBytes {
				return errStreamTooLarge
			}
			b.append(out)
			if !job.first {
				job.first = true
				if h := s.opts.Hooks.FirstChunk; h != nil {
					h(job.format, sr.Model, time.Since(job.start))
				}
			}
		}
		if end {
			return nil
		}
	}
}

// idleBody closes the upstream body when no bytes arrive for d, turning a
// stalled stream into a read error the pump can act on.
type idleBody struct {
	rc    io.ReadCloser
	d     time.Duration
	t     *time.Timer
	idle  atomic.Bool
	close atomic.Bool
}

func newIdleBody(rc io.ReadCloser, d time.Duration) *idleBody {
	b := &idleBody{rc: rc, d: d}
	if d > 0 {
		b.t = time.AfterFunc(d, func() {
			b.idle.Store(true)
			_ = rc.Close()
		})
	}
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if b.t != nil && n > 0 {
		b.t.Reset(b.d)
	}
	return n, err
}

func (b *idleBody) Close() error {
	if b.t != nil {
		b.t.Stop()
	}
	if b.close.Swap(true) {
		return nil
	}
	return b.rc.Close()
}
