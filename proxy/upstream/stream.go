package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/breakwater-dev/breakwater/proxy/upstream/outbound"
)

// StreamResponse is a streaming answer. A 2xx carries the live body; any other
// status is a 4xx pass-through whose (bounded) body is already read.
type StreamResponse struct {
	Status int
	// Header is the upstream's, without hop-by-hop headers and Content-Length.
	Header http.Header
	// Body is the live body. Closing it reports the outcome as Done would: a
	// success after io.EOF, a failure after a read error, nothing when closed early.
	Body io.ReadCloser
	// Target and Upstream name who answered; Model is the model sent upstream.
	Target, Upstream, Model string
	// Attempts counts the upstream requests this call sent, over all
	// targets; Tried is what the call did at them, its attempts merged.
	Attempts int
	Tried    *Tried

	finish func(error)
	used   *streamUsage
}

// Usage reports the input and output tokens the stream's answer says it
// used (its final usage chunk, message_delta or usageMetadata), before the
// stream ends (Done, or Body's Close): a complete stream's usage corrects
// the token budgets its request was charged at admission, as a JSON
// answer's usage does. A stream whose answer reports none leaves the
// estimate.
func (s *StreamResponse) Usage(input, output int) { s.used.set(input, output) }

// streamUsage is the usage a live stream's reader reports, read when the
// stream ends; nil when the request reads no usage (Request.Usage).
type streamUsage struct {
	mu       sync.Mutex
	in, out  int
	reported bool
}

func (u *streamUsage) set(in, out int) {
	if u == nil {
		return
	}
	u.mu.Lock()
	u.in, u.out, u.reported = in, out, true
	u.mu.Unlock()
}

func (u *streamUsage) get() (in, out int, ok bool) {
	if u == nil {
		return 0, 0, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.in, u.out, u.reported
}

// Done reports how the stream ended and releases its slot: nil for a complete
// stream, an error for a cut one (a failure for the target's breaker and weight),
// or an error wrapping context.Canceled when the client went away (no verdict).
// It closes Body. Calls after the first, and after Body.Close, do nothing.
func (s *StreamResponse) Done(err error) {
	if s.finish != nil {
		s.finish(err)
	}
}

// errClosedEarly is the outcome of a body closed before its end without a read
// error: the reader gave up, which says nothing about the upstream.
var errClosedEarly = context.Canceled

// Open sends a streaming request with the same routing, retries and fallbacks as
// Do until an upstream answers with headers. The deadline bounds the whole
// stream: a body still arriving when it passes fails with ErrDeadline. The caller must call Done (or
// close Body) when the stream ends; the upstream slot is held until then.
func (c *Caller) Open(ctx context.Context, req *Request) (*StreamResponse, error) {
	a, err := c.run(ctx, req, true)
	if err != nil {
		return nil, err
	}
	s := &StreamResponse{
		Status: a.resp.StatusCode, Header: outbound.Inbound(a.resp.Header),
		Target: a.m.t.name, Upstream: a.m.t.up.cfg.Name, Model: a.model, Attempts: a.attempts, Tried: a.tried,
	}
	if a.finish == nil {
		s.Body = io.NopCloser(bytes.NewReader(a.body))
		return s, nil
	}
	s.used = a.used
	b := &streamBody{rc: a.resp.Body, cause: a.cause}
	s.finish = func(err error) {
		b.closeOnce.Do(func() { a.finish(err) })
	}
	b.finish = s.finish
	s.Body = b
	return s, nil
}

// streamBody remembers how reading ended so that Close can report it.
type streamBody struct {
	rc        io.ReadCloser
	finish    func(error)
	cause     func() error // why the body's context ended; nil: unknown
	closeOnce sync.Once

	mu  sync.Mutex
	eof bool
	err error
}

func (b *streamBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && b.cause != nil && errors.Is(b.cause(), errDeadline) {
		err = ErrDeadline
	}
	if err != nil {
		b.mu.Lock()
		if errors.Is(err, io.EOF) {
			b.eof = true
		} else if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *streamBody) Close() error {
	b.mu.Lock()
	var outcome error
	switch {
	case b.err != nil:
		outcome = b.err
	case !b.eof:
		outcome = errClosedEarly
	}
	b.mu.Unlock()
	b.finish(outcome)
	return nil
}
