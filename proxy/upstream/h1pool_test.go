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
			srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				reply(w, 200, string(b))
			})
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

// stallAfter sends prefix to the first request, signals got, then reads
// until the client closes the connection and closes closed.
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
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) { ok(w, r, 0) })

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

// countingServer starts a loopback upstream that counts the connections it
// accepts.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	conns := new(atomic.Int32)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, conns
}
