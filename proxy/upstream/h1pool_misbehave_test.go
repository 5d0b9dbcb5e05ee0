package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
