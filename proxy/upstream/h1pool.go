package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"
)

// h1Transport sends plain-HTTP requests itself over a pool of idle HTTP/1.1
// connections, writing the request and reading the answer in the caller's
// goroutine, and hands every other request (https, a proxied one, an
// Upgrade) to its fallback unchanged.
//
// http.Transport hands each request to a write goroutine and each answer to
// a read goroutine, and its read loop goes back to reading the connection as
// soon as an answer is consumed: on a loopback or LAN upstream that costs
// about two reads per request that find no data, each a park and a wake in
// the poller. Here a connection is only read while an answer is awaited.
type h1Transport struct {
	fallback http.RoundTripper
	// proxy is the fallback's proxy choice: a request it would send through a
	// proxy (HTTP_PROXY) goes to the fallback.
	proxy  func(*http.Request) (*url.URL, error)
	dialer net.Dialer

	maxIdlePerHost int
	maxIdle        int
	idleTimeout    time.Duration
	// peekAfter is how long a connection must have been idle before it is
	// checked for a close by the server before reuse; negative: never.
	peekAfter time.Duration

	mu    sync.Mutex
	hosts map[string]*h1Host
	nidle int
}

const (
	// maxResponseHeaderBytes bounds the status lines and headers of one
	// answer, 1xx answers included, so that a hostile upstream cannot make the
	// proxy buffer unbounded headers. http.Transport's default is 10 MiB; an
	// LLM API's headers are a few KiB.
	maxResponseHeaderBytes = 1 << 20
	// max1xxResponses bounds the informational answers (100 Continue, 103
	// Early Hints; RFC 9110 §15.2) skipped before the final one, as
	// http.Transport does (5).
	max1xxResponses = 5
	// peekAfterIdle is how long a connection must have been idle before it is
	// checked with a non-blocking peek: a server's keep-alive timeout (Node's
	// 5 s, nginx's 75 s) closes connections that idle, and the check costs a
	// system call that a connection busy at load does not need.
	peekAfterIdle = time.Second
	// The pool's limits when the fallback sets none: http.DefaultTransport's
	// idle timeout and the caller's idle counts.
	defaultPoolIdleTimeout  = 90 * time.Second
	defaultPoolIdlePerHost  = 256
	defaultPoolIdleTotal    = 1024
	defaultPoolDialTimeout  = 30 * time.Second // http.DefaultTransport's dialer
	defaultPoolTCPKeepAlive = 30 * time.Second
)

var (
	errHeaderTooLarge     = fmt.Errorf("read response headers: longer than %d bytes", maxResponseHeaderBytes)
	errTooMany1xx         = fmt.Errorf("read response: more than %d informational (1xx) answers", max1xxResponses)
	errSwitchingProtocols = errors.New("read response: 101 Switching Protocols to a request that asked for no upgrade")
	// aLongTimeAgo is a deadline in the past: setting it unblocks a
	// connection's pending reads and writes.
	aLongTimeAgo = time.Unix(1, 0)
)

// newH1Transport wraps fallback. When fallback is an *http.Transport, the pool
// takes its proxy choice and idle limits.
func newH1Transport(fallback http.RoundTripper) *h1Transport {
	t := &h1Transport{
		fallback:       fallback,
		proxy:          http.ProxyFromEnvironment,
		dialer:         net.Dialer{Timeout: defaultPoolDialTimeout, KeepAlive: defaultPoolTCPKeepAlive},
		maxIdlePerHost: defaultPoolIdlePerHost,
		maxIdle:        defaultPoolIdleTotal,
		idleTimeout:    defaultPoolIdleTimeout,
		peekAfter:      peekAfterIdle,
		hosts:          make(map[string]*h1Host),
	}
	if ht, ok := fallback.(*http.Transport); ok {
		t.proxy = ht.Proxy
		if ht.MaxIdleConnsPerHost > 0 {
			t.maxIdlePerHost = ht.MaxIdleConnsPerHost
		}
		if ht.MaxIdleConns > 0 {
			t.maxIdle = ht.MaxIdleConns
		}
		if ht.IdleConnTimeout > 0 {
			t.idleTimeout = ht.IdleConnTimeout
		}
	}
	return t
}

// h1Host is one host:port's idle connections.
type h1Host struct {
	idle  []*h1Conn // the most recently used last (LIFO)
	sweep *time.Timer
}

// h1Conn is one HTTP/1.1 connection.
type h1Conn struct {
	key    string
	conn   net.Conn
	r      h1Reader
	br     *bufio.Reader
	bw     *bufio.Writer
	abort  func() // unblocks pending reads and writes
	idleAt time.Time
}

func (pc *h1Conn) close() { _ = pc.conn.Close() }

// h1Reader reads a connection, counting the bytes of the current answer and
// enforcing the header limit while limit is not negative.
type h1Reader struct {
	conn  net.Conn
	limit int64 // bytes left before errHeaderTooLarge; negative: no limit
	n     int64 // bytes read since the request was written
}

func (r *h1Reader) Read(p []byte) (int, error) {
	if r.limit >= 0 {
		if r.limit == 0 {
			return 0, errHeaderTooLarge
		}
		if int64(len(p)) > r.limit {
			p = p[:r.limit]
		}
	}
	n, err := r.conn.Read(p)
	r.n += int64(n)
	if r.limit >= 0 {
		r.limit -= int64(n)
	}
	return n, err
}

// handles reports whether the pool sends req itself.
func (t *h1Transport) handles(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" ||
		req.Method == http.MethodConnect || req.Header.Get("Upgrade") != "" {
		return false
	}
	if t.proxy != nil {
		// Go never proxies loopback hosts; an error is the fallback's to report.
		if u, err := t.proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// RoundTrip implements http.RoundTripper.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	key := hostPort(req.URL)
	for retried := false; ; retried = true {
		if ctx.Err() != nil {
			closeRequestBody(req)
			return nil, context.Cause(ctx)
		}
		pc, reused, err := t.conn(ctx, key, retried)
		if err != nil {
			closeRequestBody(req)
			return nil, ctxErr(ctx, err)
		}
		resp, stale, err := t.roundTrip(ctx, req, pc, reused)
		if err == nil {
			return resp, nil
		}
		if !stale || retried || ctx.Err() != nil {
			return nil, ctxErr(ctx, err)
		}
		// A reused connection the server had closed while it idled (its
		// keep-alive timeout ran out): nothing of an answer arrived, so the
		// request goes once more on a fresh connection, as http.Transport
		// retries errServerClosedIdle.
		next, ok := rewind(req)
		if !ok {
			return nil, err
		}
		req = next
	}
}

// ctxErr is what a failed exchange returns: the context's cause once it is
// done (the aborted connection's error is its consequence), as
// http.Transport does, else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// rewind returns req with a fresh body for a retry; ok is false when the body
// cannot be read again.
func rewind(req *http.Request) (*http.Request, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	next := *req
	next.Body = body
	return &next, true
}

// hostPort is the pool key of u: host:port, with HTTP's default port.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// roundTrip writes req on pc and reads the answer's headers. stale reports a
// failure of a reused connection before any byte of an answer arrived, which
// may be retried on a fresh one.
func (t *h1Transport) roundTrip(ctx context.Context, req *http.Request, pc *h1Conn, reused bool) (resp *http.Response, stale bool, err error) {
	stop := context.AfterFunc(ctx, pc.abort)
	pc.r.n, pc.r.limit = 0, maxResponseHeaderBytes
	err = req.Write(pc.bw) // origin form, as http.Transport writes a request sent to no proxy
	if err == nil {
		err = pc.bw.Flush()
	}
	if err != nil {
		stop()
		pc.close()
		return nil, reused, err
	}
	resp, err = readResponse(pc.br, req)
	pc.r.limit = -1
	if err != nil {
		stop()
		pc.close()
		return nil, reused && pc.r.n == 0 && closedIdle(err), err
	}
	keep := !resp.Close && !req.Close
	if resp.Body == http.NoBody { // HEAD, 204, 304, Content-Length: 0
		if stop() && keep && pc.br.Buffered() == 0 {
			t.put(pc)
		} else {
			pc.close()
		}
		return resp, false, nil
	}
	resp.Body = &h1Body{t: t, pc: pc, rc: resp.Body, ctx: ctx, stop: stop, keep: keep}
	return resp, false, nil
}

// closedIdle reports whether err is how a connection the server closed reads
// or writes: EOF, a reset, a broken pipe.
func closedIdle(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readResponse reads the final answer to req, skipping informational ones.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		switch code := resp.StatusCode; {
		case code == http.StatusSwitchingProtocols:
			return nil, errSwitchingProtocols
		case code >= 100 && code < 200:
			if n >= max1xxResponses {
				return nil, errTooMany1xx
			}
			continue
		}
		return resp, nil
	}
}

// h1Body is an answer's body: the connection goes back to the pool once the
// body has been read to its end, and is closed otherwise.
type h1Body struct {
	t    *h1Transport
	pc   *h1Conn
	rc   io.ReadCloser // http.ReadResponse's body
	ctx  context.Context
	stop func() bool // stops the context's AfterFunc; false once it ran
	keep bool        // the answer leaves the connection reusable

	mu   sync.Mutex
	done bool  // the connection was released or closed
	err  error // what reads return once done
}

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	done, derr := b.done, b.err
	b.mu.Unlock()
	if done {
		return 0, derr
	}
	n, err := b.rc.Read(p)
	switch {
	case err == nil:
	case err == io.EOF:
		err = b.end(io.EOF, true)
	default:
		err = b.end(ctxErr(b.ctx, err), false)
	}
	return n, err
}

// Close before the end closes the connection, as http.Transport does: the
// rest of the body may be long, or endless. Closing twice is safe.
func (b *h1Body) Close() error {
	b.end(http.ErrBodyReadAfterClose, false)
	return nil
}

// end releases the connection once: to the pool after a clean end of an
// answer that leaves it reusable and whose context did not fire, closed
// otherwise. It returns what reads return from now on.
func (b *h1Body) end(err error, clean bool) error {
	b.mu.Lock()
	if b.done {
		err = b.err
		b.mu.Unlock()
		return err
	}
	b.done, b.err = true, err
	b.mu.Unlock()
	if b.stop() && clean && b.keep && b.pc.br.Buffered() == 0 {
		b.t.put(b.pc)
	} else {
		b.pc.close()
	}
	return err
}

// conn returns an idle connection to key, checked when it idled long enough,
// or a new one; always a new one when fresh is set.
func (t *h1Transport) conn(ctx context.Context, key string, fresh bool) (pc *h1Conn, reused bool, err error) {
	for !fresh {
		pc = t.take(key)
		if pc == nil {
			break
		}
		if t.peekAfter >= 0 && time.Since(pc.idleAt) >= t.peekAfter && !peekAlive(pc.conn) {
			pc.close()
			continue
		}
		return pc, true, nil
	}
	c, err := t.dialer.DialContext(ctx, "tcp", key)
	if err != nil {
		return nil, false, err
	}
	pc = &h1Conn{key: key, conn: c, r: h1Reader{conn: c, limit: -1}}
	pc.br = bufio.NewReader(&pc.r)
	pc.bw = bufio.NewWriter(c)
	pc.abort = func() { _ = c.SetDeadline(aLongTimeAgo) }
	return pc, false, nil
}

// take pops key's most recently used idle connection, closing the expired
// ones; nil when none is left.
func (t *h1Transport) take(key string) *h1Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[key]
	if h == nil || len(h.idle) == 0 {
		return nil
	}
	n := len(h.idle) - 1
	pc := h.idle[n]
	h.idle[n] = nil
	h.idle = h.idle[:n]
	t.nidle--
	if time.Since(pc.idleAt) > t.idleTimeout {
		// The most recent is expired: so are all below it.
		pc.close()
		for _, old := range h.idle {
			old.close()
		}
		t.nidle -= len(h.idle)
		clear(h.idle)
		h.idle = h.idle[:0]
		return nil
	}
	return pc
}

// put makes pc idle, or closes it when the pool is full.
func (t *h1Transport) put(pc *h1Conn) {
	pc.idleAt = time.Now()
	t.mu.Lock()
	h := t.hosts[pc.key]
	if h == nil {
		h = &h1Host{}
		t.hosts[pc.key] = h
	}
	if len(h.idle) >= t.maxIdlePerHost || t.nidle >= t.maxIdle {
		t.mu.Unlock()
		pc.close()
		return
	}
	h.idle = append(h.idle, pc)
	t.nidle++
	if h.sweep == nil {
		key := pc.key
		h.sweep = time.AfterFunc(t.idleTimeout, func() { t.sweep(key) })
	}
	t.mu.Unlock()
}

// sweep closes key's connections idle for longer than the idle timeout, so
// that a host no longer called holds none, and rearms itself while any is
// left.
func (t *h1Transport) sweep(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hosts[key]
	if h == nil {
		return
	}
	now := time.Now()
	k := 0
	for k < len(h.idle) && now.Sub(h.idle[k].idleAt) > t.idleTimeout {
		h.idle[k].close()
		k++
	}
	n := copy(h.idle, h.idle[k:])
	clear(h.idle[n:])
	h.idle = h.idle[:n]
	t.nidle -= k
	if n == 0 {
		h.sweep = nil
		delete(t.hosts, key)
		return
	}
	h.sweep.Reset(t.idleTimeout - now.Sub(h.idle[0].idleAt) + time.Millisecond)
}

// CloseIdleConnections closes the pool's idle connections and the fallback's.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	hosts := t.hosts
	t.hosts = make(map[string]*h1Host)
	t.nidle = 0
	t.mu.Unlock()
	for _, h := range hosts {
		if h.sweep != nil {
			h.sweep.Stop()
		}
		for _, pc := range h.idle {
			pc.close()
		}
	}
	if c, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
