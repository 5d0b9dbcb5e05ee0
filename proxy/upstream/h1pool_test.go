package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawUpstream is a TCP server that writes HTTP/1.1 by hand, to misbehave in
// ways net/http's server will not.
type rawUpstream struct {
	ln       net.Listener
	accepted atomic.Int32
	requests atomic.Int32
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	bodies   []string
}

// startRaw serves each accepted connection with serve, which reads requests
// with next (ok is false once the client closed the connection).
func startRaw(t *testing.T, serve func(c net.Conn, next func() (body string, ok bool))) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	u := &rawUpstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.accepted.Add(1)
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				serve(c, func() (string, bool) {
					req, err := http.ReadRequest(br)
					if err != nil {
						return "", false
					}
					b, err := io.ReadAll(req.Body)
					if err != nil {
						return "", false
					}
					u.requests.Add(1)
					u.mu.Lock()
					u.bodies = append(u.bodies, string(b))
					u.mu.Unlock()
					return string(b), true
				})
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		u.mu.Lock()
		for _, c := range u.conns {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func (u *rawUpstream) url() string { return "http://" + u.ln.Addr().String() + "/v1/chat/completions" }

func (u *rawUpstream) seenBodies() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

// okAnswer is a complete, reusable answer.
const okAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"

// keepAnswering answers every request on the connection with answer.
func keepAnswering(answer string) func(net.Conn, func() (string, bool)) {
	return func(c net.Conn, next func() (string, bool)) {
		for {
			if _, ok := next(); !ok {
				return
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

// countingFallback answers 418 and counts the requests handed to it.
type countingFallback struct{ n atomic.Int32 }

func (f *countingFallback) RoundTrip(req *http.Request) (*http.Response, error) {
	f.n.Add(1)
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusTeapot, Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}

func newTestPool(t *testing.T) (*h1Transport, *countingFallback) {
	t.Helper()
	fb := &countingFallback{}
	tr := newH1Transport(fb)
	tr.proxy = nil
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if n := fb.n.Load(); n != 0 {
			t.Errorf("%d requests went to the fallback, want none", n)
		}
	})
	return tr, fb
}

func (t *h1Transport) idleCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nidle
}

// post sends body to target through rt; GetBody is set (strings.Reader).
func post(ctx context.Context, rt http.RoundTripper, target, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return rt.RoundTrip(req)
}

// fetch posts body and reads the whole answer.
func fetch(rt http.RoundTripper, target, body string) (int, string, error) {
	resp, err := post(context.Background(), rt, target, body)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestH1PoolReusesOneConnection(t *testing.T) {
	for _, peek := range []time.Duration{peekAfterIdle, 0} {
		t.Run(fmt.Sprintf("peek after %s", peek), func(t *testing.T) {
			var conns atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				reply(w, 200, string(b))
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			tr, _ := newTestPool(t)
			tr.peekAfter = peek // 0: every reuse is checked, and must find the connection alive
			for i := range 20 {
				body := fmt.Sprintf(`{"n":%d}`, i)
				status, got, err := fetch(tr, srv.URL+"/v1/chat/completions", body)
				if err != nil || status != 200 || got != body {
					t.Fatalf("request %d: %d %q %v, want 200 %q", i, status, got, err, body)
				}
				if n := tr.idleCount(); n != 1 {
					t.Fatalf("after request %d: %d idle connections, want 1", i, n)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("the server accepted %d connections for 20 sequential requests, want 1", n)
			}
		})
	}
}

func TestH1PoolRetriesAConnectionClosedWhileIdle(t *testing.T) {
	// Answers look reusable (no Connection: close) but the server closes
	// every connection after one answer, as a keep-alive timeout would.
	up := startRaw(t, func(c net.Conn, next func() (string, bool)) {
		if _, ok := next(); ok {
			io.WriteString(c, okAnswer)
		}
	})
	t.Run("retried with the body", func(t *testing.T) {
		tr, _ := newTestPool(t)
		tr.peekAfter = -1 // the request itself finds the closed connection
		var want []string
		for i := range 5 {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"question %d"}]}`, i)
			want = append(want, body)
			status, got, err := fetch(tr, up.url(), body)
			if err != nil || status != 200 || got != `{"ok":true}` {
				t.Fatalf("request %d: %d %q %v, want 200", i, status, got, err)
			}
		}
		if got := up.seenBodies(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("the server received %q, want %q", got, want)
		}
	})
	t.Run("no retry without GetBody", func(t *testing.T) {
		// The control: the second request does meet the closed connection.
		tr, _ := newTestPool(t)
		tr.peekAfter = -1
		if _, _, err := fetch(tr, up.url(), `{}`); err != nil {
			t.Fatalf("first request: %v", err)
		}
		req, _ := http.NewRequest(http.MethodPost, up.url(), io.NopCloser(strings.NewReader(`{}`)))
		req.ContentLength = 2
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatal("a request on the closed connection without GetBody succeeded; want its error")
		}
		if !closedIdle(err) {
			t.Errorf("error %v, want EOF or a reset", err)
		}
	})
}

func TestH1PoolRetriesOnAFreshConnection(t *testing.T) {
	// Two idle connections, both closed by the server: the retry after the
	// first must dial, not take the second.
	var arrived sync.WaitGroup
	var first atomic.Int32
	arrived.Add(2)
	up := startRaw(t, func(c net.Conn, next func() (string, bool)) {
		if _, ok := next(); !ok {
			return
		}
		if first.Add(1) <= 2 {
			arrived.Done()
			arrived.Wait() // both connections open at once
		}
		io.WriteString(c, okAnswer)
	})
	tr, _ := newTestPool(t)
	tr.peekAfter = -1
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := fetch(tr, up.url(), `{}`)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := tr.idleCount(); n != 2 {
		t.Fatalf("%d idle connections, want 2", n)
	}
	if _, _, err := fetch(tr, up.url(), `{"third":true}`); err != nil {
		t.Fatalf("third request: %v", err)
	}
	if n := up.accepted.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

func TestH1PoolNoRetryOnceTheAnswerStarted(t *testing.T) {
	up := startRaw(t, func(c net.Conn, next func() (string, bool)) {
		for n := 0; ; n++ {
			if _, ok := next(); !ok {
				return
			}
			if n == 0 {
				io.WriteString(c, okAnswer)
				continue
			}
			io.WriteString(c, "HTTP/1.1 20") // half a status line, then gone
			return
		}
	})
	tr, _ := newTestPool(t)
	if _, _, err := fetch(tr, up.url(), `{"n":1}`); err != nil {
		t.Fatalf("first request: %v", err)
	}
	_, _, err := fetch(tr, up.url(), `{"n":2}`)
	if err == nil {
		t.Fatal("an answer cut in its status line succeeded")
	}
	if n := up.requests.Load(); n != 2 {
		t.Errorf("the server saw %d requests, want 2 (the cut one not retried)", n)
	}
}

func TestH1PoolBoundsResponseHeaders(t *testing.T) {
	for name, answer := range map[string]string{
		"one long line": "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Big: " + strings.Repeat("a", 2*maxResponseHeaderBytes) + "\r\n\r\n",
		"many lines":    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + strings.Repeat("X-Many: "+strings.Repeat("b", 1000)+"\r\n", 2*maxResponseHeaderBytes/1000) + "\r\n",
		"1xx answers": strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: "+strings.Repeat("c", maxResponseHeaderBytes/4)+"\r\n\r\n", 5) +
			okAnswer,
	} {
		t.Run(name, func(t *testing.T) {
			up := startRaw(t, keepAnswering(answer))
			tr, _ := newTestPool(t)
			_, _, err := fetch(tr, up.url(), `{}`)
			if !errors.Is(err, errHeaderTooLarge) {
				t.Fatalf("error %v, want %v", err, errHeaderTooLarge)
			}
			if n := tr.idleCount(); n != 0 {
				t.Errorf("%d idle connections after the error, want 0", n)
			}
		})
	}
}

func TestH1PoolInformationalAnswers(t *testing.T) {
	const early = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
	tests := []struct {
		name, answer string
		want         error
	}{
		{"100 and 103 skipped", "HTTP/1.1 100 Continue\r\n\r\n" + early + okAnswer, nil},
		{"five skipped", strings.Repeat(early, max1xxResponses) + okAnswer, nil},
		{"more than the cap", strings.Repeat(early, max1xxResponses+1) + okAnswer, errTooMany1xx},
		{"101 is an error", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", errSwitchingProtocols},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startRaw(t, keepAnswering(tt.answer))
			tr, _ := newTestPool(t)
			status, body, err := fetch(tr, up.url(), `{}`)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("error %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil || status != 200 || body != `{"ok":true}` {
				t.Fatalf("got %d %q %v, want 200 and the body", status, body, err)
			}
			// The connection stays usable: the informational answers were consumed.
			if _, _, err := fetch(tr, up.url(), `{}`); err != nil {
				t.Fatalf("second request: %v", err)
			}
			if n := up.accepted.Load(); n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
		})
	}
}

func TestH1PoolDoesNotReuseClosingConnections(t *testing.T) {
	tests := []struct {
		name  string
		serve func(net.Conn, func() (string, bool))
	}{
		// The server keeps the connection open after saying it will close
		// it: only the pool's own reading of the header can keep it unused.
		{"Connection: close", keepAnswering("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")},
		{"HTTP/1.0 without keep-alive", keepAnswering("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")},
		{"body until EOF", func(c net.Conn, next func() (string, bool)) {
			if _, ok := next(); ok {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nok") // neither length nor chunks
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startRaw(t, tt.serve)
			tr, _ := newTestPool(t)
			for i := range 3 {
				status, body, err := fetch(tr, up.url(), `{}`)
				if err != nil || status != 200 || body != "ok" {
					t.Fatalf("request %d: %d %q %v", i, status, body, err)
				}
				if n := tr.idleCount(); n != 0 {
					t.Fatalf("after request %d: %d idle connections, want 0", i, n)
				}
			}
			if n := up.accepted.Load(); n != 3 {
				t.Errorf("%d connections for 3 requests, want 3", n)
			}
		})
	}
}

// stallAfter sends prefix to the first request, signals got, then reads
// until the client closes the connection and closes closed.
func stallAfter(prefix string, got chan<- struct{}, closed chan<- struct{}) func(net.Conn, func() (string, bool)) {
	return func(c net.Conn, next func() (string, bool)) {
		if _, ok := next(); !ok {
			return
		}
		io.WriteString(c, prefix)
		got <- struct{}{}
		io.Copy(io.Discard, c) // until the client closes the connection
		close(closed)
	}
}

func TestH1PoolCancel(t *testing.T) {
	cause := errors.New("attempt cut")
	tests := []struct {
		name   string
		prefix string // what the server sends before it stalls
		cancel func(context.CancelCauseFunc)
		want   error
	}{
		{"waiting for headers", "", func(c context.CancelCauseFunc) { c(nil) }, context.Canceled},
		{"reading the body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", func(c context.CancelCauseFunc) { c(nil) }, context.Canceled},
		{"the cause is returned", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", func(c context.CancelCauseFunc) { c(cause) }, cause},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, closed := make(chan struct{}, 1), make(chan struct{})
			up := startRaw(t, stallAfter(tt.prefix, got, closed))
			tr, _ := newTestPool(t)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			done := make(chan error, 1)
			go func() {
				resp, err := post(ctx, tr, up.url(), `{}`)
				if err != nil {
					done <- err
					return
				}
				defer resp.Body.Close()
				b := make([]byte, 10)
				if _, err := io.ReadFull(resp.Body, b); err != nil {
					done <- fmt.Errorf("the first bytes: %w", err)
					return
				}
				_, err = resp.Body.Read(b)
				done <- err
			}()
			<-got
			tt.cancel(cancel)
			select {
			case err := <-done:
				if !errors.Is(err, tt.want) {
					t.Fatalf("error %v, want %v", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the round trip did not return after the cancel")
			}
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the connection stayed open after the cancel")
			}
			if n := tr.idleCount(); n != 0 {
				t.Errorf("%d idle connections, want 0", n)
			}
		})
	}
}

func TestH1PoolPeeksAtLongIdleConnections(t *testing.T) {
	// One answer per connection, then the server closes it: a keep-alive
	// timeout that ran out while the connection idled.
	closedOne := make(chan struct{}, 4)
	up := startRaw(t, func(c net.Conn, next func() (string, bool)) {
		if _, ok := next(); ok {
			io.WriteString(c, okAnswer)
		}
		c.Close()
		closedOne <- struct{}{}
	})
	noGetBody := func(tr http.RoundTripper) error {
		req, _ := http.NewRequest(http.MethodPost, up.url(), io.NopCloser(strings.NewReader(`{}`)))
		req.ContentLength = 2 // no GetBody: a stale connection cannot be retried
		resp, err := tr.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err
	}
	serverClosed := func(t *testing.T, tr *h1Transport) {
		t.Helper()
		<-closedOne
		tr.mu.Lock()
		pc := tr.hosts[up.ln.Addr().String()].idle[0]
		tr.mu.Unlock()
		waitFor(t, func() bool { return !peekAlive(pc.conn) })
	}
	t.Run("detected", func(t *testing.T) {
		tr, _ := newTestPool(t)
		tr.peekAfter = 0 // every idle connection is old enough to be checked
		if err := noGetBody(tr); err != nil {
			t.Fatalf("first request: %v", err)
		}
		serverClosed(t, tr)
		if err := noGetBody(tr); err != nil {
			t.Fatalf("second request: %v (the closed connection was used)", err)
		}
	})
	t.Run("not checked when recent", func(t *testing.T) {
		tr, _ := newTestPool(t)
		tr.peekAfter = time.Hour
		if err := noGetBody(tr); err != nil {
			t.Fatalf("first request: %v", err)
		}
		serverClosed(t, tr)
		if err := noGetBody(tr); err == nil {
			t.Fatal("the second request succeeded: want it to meet the closed connection unchecked")
		}
	})
}

func TestH1PoolFallback(t *testing.T) {
	up := startRaw(t, keepAnswering(okAnswer))
	fb := &countingFallback{}
	tr := newH1Transport(fb)
	defer tr.CloseIdleConnections()
	// http.ProxyFromEnvironment reads HTTP_PROXY once per process, so the
	// test gives the pool the proxy function the fallback would use.
	proxy, _ := url.Parse("http://proxy.test:3128")
	tr.proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "example.test" {
			return proxy, nil
		}
		return nil, nil
	}
	for _, tt := range []struct {
		url     string
		upgrade bool
		pooled  bool
	}{
		{"https://api.openai.com/v1/chat/completions", false, false},
		{"http://example.test/v1/chat/completions", false, false}, // proxied
		{up.url(), true, false}, // an Upgrade
		{up.url(), false, true},
	} {
		before := fb.n.Load()
		req, _ := http.NewRequest(http.MethodPost, tt.url, strings.NewReader(`{}`))
		if tt.upgrade {
			req.Header.Set("Upgrade", "websocket")
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.url, err)
		}
		resp.Body.Close()
		want, wantStatus := before+1, http.StatusTeapot
		if tt.pooled {
			want, wantStatus = before, http.StatusOK
		}
		if n := fb.n.Load(); n != want || resp.StatusCode != wantStatus {
			t.Errorf("%s (upgrade %v): status %d, fallback count %d; want %d, %d", tt.url, tt.upgrade, resp.StatusCode, n, wantStatus, want)
		}
	}
	if n := up.requests.Load(); n != 1 {
		t.Errorf("the plain-HTTP server saw %d requests, want 1", n)
	}
}

// TestH1PoolHTTPProxyFromEnvironment checks, in a child process (Go reads
// HTTP_PROXY once per process), that a request HTTP_PROXY applies to goes
// through the fallback to the proxy, and a loopback one (never proxied by
// Go) through the pool.
func TestH1PoolHTTPProxyFromEnvironment(t *testing.T) {
	if os.Getenv("BREAKWATER_H1POOL_PROXY_CHILD") == "" {
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "via proxy to %s", r.Host)
		}))
		defer proxy.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^TestH1PoolHTTPProxyFromEnvironment$", "-test.count=1")
		cmd.Env = append(os.Environ(), "BREAKWATER_H1POOL_PROXY_CHILD=1", "HTTP_PROXY="+proxy.URL,
			"http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=", "REQUEST_METHOD=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	tr := newH1Transport(http.DefaultTransport.(*http.Transport).Clone())
	defer tr.CloseIdleConnections()
	status, body, err := fetch(tr, "http://example.test/v1/models", "")
	if err != nil || status != 200 || body != "via proxy to example.test" {
		t.Fatalf("proxied request: %d %q %v, want the proxy's answer", status, body, err)
	}
	if n := tr.idleCount(); n != 0 {
		t.Errorf("%d idle connections in the pool after a proxied request, want 0", n)
	}
	up := startRaw(t, keepAnswering(okAnswer))
	if _, _, err := fetch(tr, up.url(), `{}`); err != nil {
		t.Fatalf("loopback request: %v", err)
	}
	if n := tr.idleCount(); n != 1 {
		t.Errorf("%d idle connections in the pool after a loopback request, want 1", n)
	}
}

func TestH1PoolTakesTheTransportsSettings(t *testing.T) {
	ht := http.DefaultTransport.(*http.Transport).Clone()
	ht.MaxIdleConnsPerHost = 7
	tr := newH1Transport(ht)
	if tr.proxy == nil || tr.maxIdlePerHost != 7 || tr.idleTimeout != ht.IdleConnTimeout {
		t.Errorf("pool proxy set %v, idle per host %d, idle timeout %s; want the transport's (7, %s)",
			tr.proxy != nil, tr.maxIdlePerHost, tr.idleTimeout, ht.IdleConnTimeout)
	}
	c := newCaller(t, oneTarget("http://127.0.0.1:1"))
	if _, ok := c.transport.(*h1Transport); !ok {
		t.Errorf("the caller's default transport is %T, want *h1Transport", c.transport)
	}
}

func TestH1PoolEarlyClose(t *testing.T) {
	// The first answer promises 20 bytes and sends 10: a Close after reading
	// them finds nothing buffered, and must still not pool the connection.
	var cut atomic.Bool
	up := startRaw(t, func(c net.Conn, next func() (string, bool)) {
		if cut.Swap(true) {
			keepAnswering(okAnswer)(c, next)
			return
		}
		if _, ok := next(); ok {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n0123456789")
			next() // until the client closes the connection
		}
	})
	tr, _ := newTestPool(t)
	resp, err := post(context.Background(), tr, up.url(), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := resp.Body.Read(b); !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Errorf("Read after Close: %v, want %v", err, http.ErrBodyReadAfterClose)
	}
	if n := tr.idleCount(); n != 0 {
		t.Fatalf("%d idle connections after an early Close, want 0", n)
	}
	status, body, err := fetch(tr, up.url(), `{}`)
	if err != nil || status != 200 || body != `{"ok":true}` {
		t.Fatalf("second request: %d %q %v", status, body, err)
	}
	if n := up.accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the early-closed one not reused)", n)
	}
	if n := tr.idleCount(); n != 1 {
		t.Errorf("%d idle connections after a body read to its end, want 1", n)
	}
}

func TestH1PoolIdleBounds(t *testing.T) {
	release := make(chan struct{})
	var inHandler sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler.Done()
		<-release
		reply(w, 200, `{}`)
	}))
	defer srv.Close()
	tr, _ := newTestPool(t)
	tr.maxIdlePerHost = 2
	const n = 5
	inHandler.Add(n)
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := fetch(tr, srv.URL, `{}`)
			errs <- err
		}()
	}
	inHandler.Wait() // n connections at once
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.idleCount(); got != 2 {
		t.Errorf("%d idle connections, want the per-host limit 2", got)
	}

}

func TestH1PoolIdleTimeout(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ok(w, r, 0) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	// Expired when taken: closed, never reused.
	tr, _ := newTestPool(t)
	tr.idleTimeout = time.Nanosecond
	for i := range 3 {
		if _, _, err := fetch(tr, srv.URL, `{}`); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections for 3 requests with every idle one expired, want 3", n)
	}

	// A pool nobody calls is emptied by the sweep.
	tr2, _ := newTestPool(t)
	tr2.idleTimeout = 20 * time.Millisecond
	if _, _, err := fetch(tr2, srv.URL, `{}`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return tr2.idleCount() == 0 })
}

func TestH1PoolConcurrentWithCancels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), "slow") {
			select { // held until the client gives up
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		reply(w, 200, string(b))
	}))
	defer srv.Close()
	tr, _ := newTestPool(t)
	tr.maxIdlePerHost = 4
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if i%5 == 4 { // cancelled at some point of its round trip
					ctx, cancel := context.WithCancel(context.Background())
					go func() { time.Sleep(time.Millisecond); cancel() }()
					resp, err := post(ctx, tr, srv.URL, `{"slow":true}`)
					if err == nil {
						_, err = io.ReadAll(resp.Body)
						resp.Body.Close()
					}
					if !errors.Is(err, context.Canceled) {
						errs <- fmt.Errorf("cancelled request: %v, want context.Canceled", err)
					}
					cancel()
					continue
				}
				body := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				status, got, err := fetch(tr, srv.URL, body)
				if err != nil || status != 200 || got != body {
					errs <- fmt.Errorf("request %d/%d: %d %q %v", w, i, status, got, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := tr.idleCount(); n > 4 {
		t.Errorf("%d idle connections, want at most the per-host limit 4", n)
	}
}
