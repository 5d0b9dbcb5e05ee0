package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"
)

// Defaults of the bounds that protect the process from hostile clients and
// upstreams. Each one is an Options field and a config key.
const (
	// DefaultMaxBodyBytes caps one request body (413 beyond).
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxBodyBytesInFlight caps the request bodies held at once by
	// the cached endpoints; a request that does not fit gets 503 at once.
	DefaultMaxBodyBytesInFlight = 64 << 20
	// DefaultReadHeaderTimeout bounds reading a request's headers
	// (slowloris).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading one whole request, body included
	// (a body trickled in one byte at a time is cut).
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds one write to the client: a client that
	// stops reading is cut. Each write of a stream gets its own window, so
	// it does not limit a stream's length (the request deadline does).
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxConnections caps the connections served at once. At the
	// cap the connection quiet the longest (idle, or silent since it
	// connected) is closed for a new one; when none is quiet, new ones wait
	// in the kernel's accept queue.
	DefaultMaxConnections = 1024
	// DefaultStreamIdleTimeout is the longest gap between two chunks of an
	// upstream stream before it counts as cut.
	DefaultStreamIdleTimeout = 30 * time.Second
	// DefaultMaxStreamBytes caps the bytes of one upstream stream (resumed
	// parts included); beyond it the stream ends with an error event.
	DefaultMaxStreamBytes = 16 << 20
	// DefaultMaxEventBytes caps one SSE event (all its lines). OpenAI's
	// chunks are a few hundred bytes; a tool call's arguments arrive in
	// many small deltas.
	DefaultMaxEventBytes = 1 << 20
	// DefaultMaxTemperature is the configuration's Options.MaxTemperature:
	// 1.0, the APIs' default temperature, so that only requests asking for
	// more variety than the default bypass the cache. (The option's zero
	// caches temperature-0 requests only.)
	DefaultMaxTemperature = 1.0
	// DefaultStaleThreshold is the configuration's Options.StaleThreshold:
	// the lowest similarity of a stale answer served when no upstream can
	// answer, below cache.DefaultThreshold (a fallback, not a stricter match).
	DefaultStaleThreshold = 0.85
)

// noBodyLimit is MaxBodyBytes when it is negative (none): larger than any
// body, and small enough that the readers' n+1 cannot overflow.
const noBodyLimit = 1 << 40

// HTTPServer returns an *http.Server for s with its read, idle and header
// timeouts set from Options. The write timeout is applied per write by the
// server's middleware (http.Server.WriteTimeout would cut every stream that
// outlives it, however healthy).
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       s.opts.ConnIdleTimeout,
		ConnState:         trackConnState,
	}
}

// Listener bounds ln to Options.MaxConnections connections served at once.
// At the limit, the connection quiet the longest (idle between requests, or
// connected without a byte sent) is closed to make room (connlimit.go); when
// all are in a request, Accept waits for a slot, so a flood of connections
// costs kernel backlog, not goroutines and buffers. The http.Server must be
// the one HTTPServer returns (its ConnState tells quiet from busy).
func (s *Server) Listener(ln net.Listener) net.Listener {
	if s.opts.MaxConnections <= 0 {
		return ln
	}
	return newConnLimit(ln, s.opts.MaxConnections, s.opts.Metrics)
}

// deadlines is the first middleware: it gives every write WriteTimeout
// (net/http itself clears ReadTimeout's deadline once the body is read, in
// connReader.startBackgroundRead, so a long stream is not cut by it).
func (s *Server) deadlines(next echo.HandlerFunc) echo.HandlerFunc {
	if s.opts.WriteTimeout <= 0 {
		return next
	}
	return func(c echo.Context) error {
		res := c.Response()
		w := &writeDeadline{ResponseWriter: res.Writer, rc: http.NewResponseController(res.Writer), d: s.opts.WriteTimeout}
		w.arm(time.Now())
		res.Writer = w
		err := next(c)
		// net/http writes the end of the response (the last chunk, buffered
		// bytes) after the handler returns: give that its own window too.
		w.extend()
		return err
	}
}

// writeDeadline gives each write (and flush) to the client at least 7/8 of
// d to complete. Setting a connection's deadline moves a runtime timer, so
// it is moved again only once d/8 of it has been used: an exact hit's four
// writes and flushes then cost one timer move instead of four.
type writeDeadline struct {
	http.ResponseWriter
	rc    *http.ResponseController
	d     time.Duration
	armed time.Time // when the deadline was last set (monotonic)
}

func (w *writeDeadline) arm(now time.Time) {
	w.armed = now
	_ = w.rc.SetWriteDeadline(now.Add(w.d))
}

func (w *writeDeadline) extend() {
	if now := time.Now(); now.Sub(w.armed) >= w.d/8 {
		w.arm(now)
	}
}

func (w *writeDeadline) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *writeDeadline) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

func (w *writeDeadline) Flush() {
	w.extend()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *writeDeadline) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodyBudget admits a request to the cached endpoints only when its body
// fits the bytes in flight (Options.MaxBodyBytesInFlight), and holds them
// until the request ends: the body stays referenced until then. A body of
// unknown length (chunked) reserves MaxBodyBytes while it is read and keeps
// only its length afterwards.
func (s *Server) bodyBudget(next echo.HandlerFunc) echo.HandlerFunc {
	if s.bodySem == nil {
		return next
	}
	return func(c echo.Context) error {
		n := c.Request().ContentLength
		if n < 0 || n > s.opts.MaxBodyBytes {
			n = s.opts.MaxBodyBytes
		}
		n = min(n, s.opts.MaxBodyBytesInFlight)
		if n == 0 {
			return next(c)
		}
		if !s.bodySem.TryAcquire(n) {
			s.opts.Metrics.LimitReached("server.max_body_bytes_in_flight")
			c.Response().Header().Set("Connection", "close")
			return writeError(c, http.StatusServiceUnavailable, "server_busy",
				"breakwater: too many request bytes in flight (server.max_body_bytes_in_flight = "+
					strconv.FormatInt(s.opts.MaxBodyBytesInFlight, 10)+"); retry shortly", time.Second)
		}
		req := c.Request()
		held := &heldBody{ReadCloser: req.Body, sem: s.bodySem, held: n, chunked: req.ContentLength < 0}
		req.Body = held
		defer held.release()
		return next(c)
	}
}

// heldBody holds a request's share of the in-flight budget. A body of
// unknown length gives back what it did not use once it has been read.
type heldBody struct {
	io.ReadCloser
	sem     *semaphore.Weighted
	mu      sync.Mutex
	held    int64
	read    int64
	chunked bool
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.read += int64(n)
	if errors.Is(err, io.EOF) && b.chunked && b.read < b.held {
		b.sem.Release(b.held - b.read)
		b.held = b.read
	}
	return n, err
}

func (b *heldBody) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held > 0 {
		b.sem.Release(b.held)
		b.held = 0
	}
}

func newBodySem(limit int64) *semaphore.Weighted {
	if limit <= 0 {
		return nil
	}
	return semaphore.NewWeighted(limit)
}
