package app

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy"
)

// Finding (issue 27): with 3,000 connections open and silent, a normal
// request got no answer within 10 s: the 1,024 slots of
// server.max_connections were held by clients that sent nothing, and new
// connections waited in the accept queue. At the limit the connection quiet
// the longest is now closed to make room, so with default settings a request
// that sends its headers is answered within 2 s.
func TestIdleConnectionsDoNotStarveARequest(t *testing.T) {
	const idle = 3000
	raiseOpenFiles(t, 2*idle+1000) // both ends of every connection live in this process
	r := startBounds(t, "")        // default max_connections
	addr := strings.TrimPrefix(r.url, "http://")

	var closedByServer atomic.Int64
	done := make(chan struct{}, idle)
	// Every connection is established (in the server's accept queue or
	// taken) before the request below dials.
	for range idle {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			// Sends nothing; a read ends when the server closes it (or at cleanup).
			_, _ = io.Copy(io.Discard, c)
			closedByServer.Add(1)
			done <- struct{}{}
		}()
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-test","messages":[{"role":"user","content":"an ordinary question"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a request with %d silent connections open: %v after %s", idle, err, time.Since(start))
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "answer to: an ordinary question") {
		t.Fatalf("a request with %d silent connections open: %d %s", idle, resp.StatusCode, body)
	}
	t.Logf("answered in %s with %d silent connections open", time.Since(start), idle)

	// The bound holds: the server keeps max_connections of them and closes
	// the rest.
	want := int64(idle - proxy.DefaultMaxConnections)
	timeout := time.After(60 * time.Second)
	for closedByServer.Load() < want {
		select {
		case <-done:
		case <-timeout:
			t.Fatalf("the server closed %d of %d silent connections beyond max_connections = %d",
				closedByServer.Load(), want, proxy.DefaultMaxConnections)
		}
	}
}

// raiseOpenFiles lifts the soft limit on open files to at least n, up to the
// hard limit; the test cannot run below n.
func raiseOpenFiles(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Fatalf("RLIMIT_NOFILE hard limit %d, the test needs %d open files", lim.Max, n)
	}
	old := lim
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}
