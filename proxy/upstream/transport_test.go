package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// closeOnReuse is a loopback HTTP/1.1 server that answers the first request on
// each connection with a keep-alive 200, and on a reused connection reads the
// whole request, body included, then closes the connection without a byte of
// answer: a keep-alive timeout or a crash that races the request. It counts
// every request it read in full.
type closeOnReuse struct {
	ln       net.Listener
	requests atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func startCloseOnReuse(t *testing.T) *closeOnReuse {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &closeOnReuse{ln: ln, conns: make(map[net.Conn]struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns { // idle keep-alive connections the caller holds
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *closeOnReuse) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, err = io.Copy(io.Discard, req.Body)
		req.Body.Close()
		if err != nil {
			return
		}
		s.requests.Add(1)
		if n > 0 {
			return // the whole request was read; no answer, the connection closes
		}
		body := `{"id":"chatcmpl-1","object":"chat.completion"}`
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

func (s *closeOnReuse) url() string { return "http://" + s.ln.Addr().String() + "/v1" }

// TestPOSTNotResentBehindTheCallersBack: a POST whose body reached the server
// may have started a generation that is billed; it is sent again only as a
// new attempt the caller counts. net/http's Transport retries a request on a
// reused connection only when nothing was written or the request is
// idempotent (Request.isReplayable: GET, HEAD, OPTIONS, TRACE or an
// Idempotency-Key header), so every request the server read is an attempt.
func TestPOSTNotResentBehindTheCallersBack(t *testing.T) {
	up := startCloseOnReuse(t)
	c := newCaller(t, oneTarget(up.url()))
	attempts := 0
	for i := range 6 {
		req := chat("gpt-4o")
		req.Body = fmt.Appendf(nil, `{"model":"gpt-4o","messages":[{"role":"user","content":"question %d"}]}`, i)
		resp, err := c.Do(t.Context(), req)
		switch {
		case err == nil:
			attempts += resp.Attempts
		default:
			var ue *Error
			if !errors.As(err, &ue) {
				t.Fatalf("request %d: %v, want an *Error", i, err)
			}
			attempts += ue.Attempts
		}
	}
	if got := up.requests.Load(); got != int64(attempts) {
		t.Errorf("the server read %d requests; the caller counted %d attempts", got, attempts)
	}
	if got := up.requests.Load(); got <= 6 {
		t.Errorf("the server read %d requests for 6 calls; want some sent on a reused connection and closed unanswered", got)
	}
}
