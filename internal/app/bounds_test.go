package app

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// boundsConfig runs without the cache (no encoder to load): these tests are
// about connections and bodies.
func boundsConfig(server string) string {
	return `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
` + server + `
[cache]
enabled = false
data_dir = "{{DATA}}"
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
`
}

func startBounds(t *testing.T, server string) *running {
	t.Helper()
	up := httptest.NewServer(&model{})
	t.Cleanup(up.Close)
	return start(t, boundsConfig(server), up.URL)
}

// answersMeanwhile asks an ordinary question from another client.
func answersMeanwhile(t *testing.T, r *running) {
	t.Helper()
	status, _, body := r.chat(t, "an ordinary question")
	if status != 200 || !strings.Contains(body, "answer to: an ordinary question") {
		t.Errorf("another client meanwhile: %d %s", status, body)
	}
}

func dial(t *testing.T, r *running) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads c until the server closes it and returns how long
// that took, or fails after limit.
func closedWithin(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", limit)
	}
	return time.Since(start)
}

// Finding: a body sent at one byte every few seconds stayed open past 75 s.
// server.read_timeout now cuts it.
func TestSlowBodyIsCut(t *testing.T) {
	r := startBounds(t, `read_timeout = "1s"`)
	c := dial(t, r)
	fmt.Fprint(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	answersMeanwhile(t, r)
	if d := closedWithin(t, c, 15*time.Second); d > 10*time.Second {
		t.Errorf("slow body cut after %s, want about read_timeout (1s)", d)
	}
}

// Finding: idle keep-alive connections were never closed.
func TestIdleKeepAliveIsClosed(t *testing.T) {
	r := startBounds(t, `idle_timeout = "500ms"`)
	c := dial(t, r)
	fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz = %d", resp.StatusCode)
	}
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive: read = %v after %s, want EOF (closed by idle_timeout)", err, time.Since(start))
	}
}

// Finding: 5,000 connections became 5,021 goroutines. server.max_connections
// now bounds the connections served at once; a client already connected
// keeps being served.
func TestConnectionFloodIsBounded(t *testing.T) {
	const limit, flood = 16, 300
	r := startBounds(t, fmt.Sprintf("max_connections = %d\nread_header_timeout = \"1s\"", limit))
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	get := func() int {
		resp, err := client.Get(r.url + "/healthz")
		if err != nil {
			t.Errorf("GET /healthz during the flood: %v", err)
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if get() != 200 {
		t.Fatal("no answer before the flood")
	}
	runtime.GC()
	base := runtime.NumGoroutine()
	for range flood {
		dial(t, r) // connects and sends nothing
	}
	peak := 0
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		peak = max(peak, runtime.NumGoroutine())
		if got := get(); got != 200 {
			t.Errorf("GET /healthz on the kept connection during the flood = %d", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d idle connections: goroutines %d -> peak %d", flood, base, peak)
	if grew := peak - base; grew > 4*limit {
		t.Errorf("%d idle connections added %d goroutines, want at most %d (max_connections = %d)", flood, grew, 4*limit, limit)
	}
}

// Finding: 300 stalled 3.8 MB bodies took the heap to 2.2 GB.
// server.max_body_bytes_in_flight now refuses what does not fit (503), and
// read_timeout frees what was admitted.
func TestStalledBodiesDoNotFillTheHeap(t *testing.T) {
	const conns, size, inFlight = 40, 3_800_000, 16 << 20
	r := startBounds(t, fmt.Sprintf("max_body_bytes = \"4MiB\"\nmax_body_bytes_in_flight = %d\nread_timeout = \"5s\"", inFlight))
	body := bytes.Repeat([]byte(" "), size-100_000) // all but the last 100 kB
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	var wg sync.WaitGroup
	statuses := make([]string, conns)
	for i := range conns {
		c := dial(t, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
			_ = c.SetWriteDeadline(time.Now().Add(15 * time.Second))
			_, _ = c.Write(body) // a refused body fails here, an admitted one stalls after it
			_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			line, _ := bufio.NewReader(c).ReadString('\n')
			statuses[i] = strings.TrimSpace(line)
		}()
	}
	var peak uint64
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(10 * time.Millisecond):
		}
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapAlloc)
	}
	answersMeanwhile(t, r)
	refused := 0
	for _, s := range statuses {
		if strings.Contains(s, "503") {
			refused++
		}
	}
	grew := float64(peak-min(peak, base)) / (1 << 20)
	t.Logf("%d stalled bodies: %d refused with 503, heap grew %.0f MiB", conns, refused, grew)
	if grew > 48 {
		t.Errorf("heap grew by %.0f MiB with %d stalled %d-byte bodies, want under 48 MiB (max_body_bytes_in_flight = 16 MiB)", grew, conns, size)
	}
	if refused < conns-inFlight/size-1 {
		t.Errorf("%d of %d stalled bodies refused, want all but the %d that fit", refused, conns, inFlight/size)
	}
}

// The read and write timeouts must not cut a healthy stream that outlives
// them: the read deadline ends with the body, and each write has its own.
func TestLongStreamOutlivesServerTimeouts(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 25 {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%d \"},\"finish_reason\":null}]}\n\n", i)
			_ = rc.Flush()
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	r := start(t, boundsConfig("read_timeout = \"1s\"\nwrite_timeout = \"1s\""), up.URL)
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"count slowly"}]}`))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(b), `"24 "`) || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("after %s: err %v, stream %q; want all 25 chunks and [DONE]", time.Since(start), err, b)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("stream took %s; the test needs it to outlive the 1s timeouts", d)
	}
}
