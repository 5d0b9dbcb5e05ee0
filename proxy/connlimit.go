package proxy

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// connLimit serves at most max connections at once. When a new connection
// arrives at the limit, the connection that has been quiet the longest is
// closed to make room: one idle between requests (http.StateIdle) or one
// that has not sent a byte since it connected (http.StateNew). Closing an
// idle keep-alive connection is what a server's idle timeout does anyway
// (RFC 9112 §9.8: a client must be ready to retry on a new connection).
// Only when every connection is in a request does Accept wait for a slot, so
// idle or silent clients cannot keep a request that sends its headers from
// being served.
type connLimit struct {
	net.Listener
	max     int
	metrics *Metrics

	mu    sync.Mutex
	n     int        // connections held, at most max
	quiet *list.List // of *limitedConn, quiet the longest first
	// evicting counts connections closed to make room whose server
	// goroutine has not finished yet; their slots are still held, so the
	// goroutines never outnumber max. At most maxEvicting at once.
	evicting    int
	maxEvicting int

	// wake is signalled when a slot frees or a connection turns quiet, for
	// an Accept waiting at the limit.
	wake      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newConnLimit(ln net.Listener, limit int, m *Metrics) *connLimit {
	return &connLimit{
		Listener: ln, max: limit, metrics: m,
		maxEvicting: min(max(limit/16, 1), 64),
		quiet:       list.New(),
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
}

func (l *connLimit) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Accept takes the next connection and admits it within the limit, closing
// the quietest connection when the limit is reached.
func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		l.mu.Lock()
		if l.n < l.max {
			l.n++
			lc := &limitedConn{Conn: c, l: l}
			lc.elem = l.quiet.PushBack(lc) // silent until it sends a request
			l.mu.Unlock()
			return lc, nil
		}
		var victim *limitedConn
		if e := l.quiet.Front(); e != nil && l.evicting < l.maxEvicting {
			victim = l.quiet.Remove(e).(*limitedConn)
			victim.elem = nil
			victim.evicted = true
			l.evicting++
		}
		l.mu.Unlock()
		if victim != nil {
			l.metrics.LimitReached("server.max_connections")
			// The server's read fails and its goroutine closes the
			// connection through limitedConn.Close, which frees the slot.
			victim.Conn.Close()
			continue
		}
		select {
		case <-l.wake:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

func (l *connLimit) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn holds one slot of a connLimit until it is closed.
type limitedConn struct {
	net.Conn
	l         *connLimit
	closeOnce sync.Once
	// Guarded by l.mu: its place among the quiet connections (nil while in
	// a request, hijacked or closed), and whether it was closed to make room.
	elem    *list.Element
	evicted bool
	closed  bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		l := c.l
		l.mu.Lock()
		if c.elem != nil {
			l.quiet.Remove(c.elem)
			c.elem = nil
		}
		c.closed = true
		if c.evicted {
			l.evicting--
		}
		l.n--
		l.mu.Unlock()
		l.signal()
	})
	return err
}

// trackConnState is http.Server.ConnState for connections from a connLimit:
// a connection new or idle between requests goes to the back of the quiet
// list, one in a request (or hijacked) leaves it.
func trackConnState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l := lc.l
	switch state {
	case http.StateNew, http.StateIdle:
		l.mu.Lock()
		if !lc.evicted && !lc.closed {
			if lc.elem != nil {
				l.quiet.MoveToBack(lc.elem)
			} else {
				lc.elem = l.quiet.PushBack(lc)
			}
		}
		l.mu.Unlock()
		l.signal()
	case http.StateActive, http.StateHijacked:
		l.mu.Lock()
		if lc.elem != nil {
			l.quiet.Remove(lc.elem)
			lc.elem = nil
		}
		l.mu.Unlock()
	}
}
