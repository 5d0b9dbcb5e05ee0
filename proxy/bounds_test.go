package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// heapWatch samples the live heap while a hostile input runs and reports
// the peak above the baseline taken at start.
type heapWatch struct {
	base uint64
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func watchHeap() *heapWatch {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	h := &heapWatch{base: m.HeapAlloc, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > h.peak.Load() {
				h.peak.Store(m.HeapAlloc)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// growth stops sampling and returns the peak heap growth in MiB.
func (h *heapWatch) growth() float64 {
	close(h.stop)
	<-h.done
	p := h.peak.Load()
	if p < h.base {
		return 0
	}
	return float64(p-h.base) / (1 << 20)
}

// postStream sends a stream request and returns the last bytes of what came
// back (the body itself is discarded as it arrives, so the test's own
// memory stays flat).
func postStream(t *testing.T, e *env, question string) (status int, tail string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.front.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":`+quote(question)+`}]}`))
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var last []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		last = append(last, buf[:n]...)
		if len(last) > 8<<10 {
			last = append(last[:0], last[len(last)-4<<10:]...)
		}
		if err != nil {
			break
		}
	}
	return resp.StatusCode, string(last)
}

// servesMeanwhile checks, while a hostile input runs, that another client
// still gets its answer.
func servesMeanwhile(t *testing.T, e *env, started <-chan struct{}) func() {
	t.Helper()
	var wg sync.WaitGroup
	var status int
	var content string
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-started
		r := e.post("/v1/chat/completions", chat("an ordinary question"), "Authorization", "Bearer other-tenant")
		status, content = r.status, string(r.body)
	}()
	return func() {
		wg.Wait()
		if status != 200 || !strings.Contains(content, "answer to: an ordinary question") {
			t.Errorf("another client during the hostile input: %d %s", status, truncate(content, 200))
		}
	}
}

// chunkEvent is one SSE chunk whose delta carries n bytes of content.
func chunkEvent(n int) []byte {
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": strings.Repeat("x", n)}, "finish_reason": nil}}})
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// Finding: an upstream streaming 64 KB chunks forever grew the heap without
// bound. Now the stream is cut at stream.max_bytes with an error event.
func TestEndlessStreamIsCutAtMaxBytes(t *testing.T) {
	const limit, safety = 4 << 20, 64 << 20
	m := NewMetrics(prometheus.NewRegistry())
	e := newEnv(t, envOptions{
		proxy:  func(o *Options) { o.MaxStreamBytes = limit; o.Metrics = m },
		caller: func(o *upstream.Options) { o.Retry.Deadline = time.Minute }, // only the byte limit may end it
	})
	ev := chunkEvent(64 << 10)
	var sent atomic.Int64
	started := make(chan struct{})
	var once sync.Once
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if lastUser(body) != "flood" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		for sent.Load() < safety && r.Context().Err() == nil {
			if _, err := w.Write(ev); err != nil || rc.Flush() != nil {
				break
			}
			if sent.Add(int64(len(ev))) > 1<<20 {
				once.Do(func() { close(started) })
			}
		}
		once.Do(func() { close(started) })
		return true
	}
	check := servesMeanwhile(t, e, started)
	h := watchHeap()
	start := time.Now()
	status, tail := postStream(t, e, "flood")
	grew := h.growth()
	t.Logf("endless 64 KiB-chunk stream: upstream sent %d MiB, heap grew %.1f MiB, ended after %s", sent.Load()>>20, grew, time.Since(start).Round(time.Millisecond))
	check()
	if status != 200 || !strings.Contains(tail, "stream_interrupted") || !strings.Contains(tail, "stream.max_bytes") {
		t.Fatalf("status %d, stream ended with %q; want an error event naming stream.max_bytes", status, truncate(tail, 300))
	}
	if got := testutil.ToFloat64(m.Limits.WithLabelValues("stream.max_bytes")); got != 1 {
		t.Errorf("breakwater_limits_reached_total{limit=stream.max_bytes} = %v, want 1", got)
	}
	if got := sent.Load(); got > 3*limit {
		t.Errorf("upstream sent %d MiB before the cut, want about %d MiB", got>>20, limit>>20)
	}
	// Relayed events and the assembled text are each bounded by the limit.
	if grew > 48 {
		t.Errorf("heap grew by %.0f MiB during the stream, want under 48 MiB (limit %d MiB)", grew, limit>>20)
	}
	req, _ := http.NewRequest(http.MethodPost, e.front.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"flood"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // hangs up: the upstream stream is cancelled
	if got := resp.Header.Get(HeaderCache); got != OutcomeMiss {
		t.Errorf("repeat after a cut stream: %s = %q, want %q (a cut stream is never cached)", HeaderCache, got, OutcomeMiss)
	}
}

// Finding: one 1.5 GB SSE line was read whole. Now an event beyond
// stream.max_event_bytes ends the stream at once.
func TestHugeSSELineIsCut(t *testing.T) {
	const limit, safety = 256 << 10, 64 << 20
	e := newEnv(t, envOptions{proxy: func(o *Options) { o.MaxEventBytes = limit }})
	var sent atomic.Int64
	started := make(chan struct{})
	var once sync.Once
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if lastUser(body) != "one long line" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		_, _ = w.Write(chunkEvent(10))
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`)
		piece := bytes.Repeat([]byte("y"), 64<<10)
		for sent.Load() < safety && r.Context().Err() == nil {
			if _, err := w.Write(piece); err != nil || rc.Flush() != nil {
				break
			}
			if sent.Add(int64(len(piece))) > 1<<20 {
				once.Do(func() { close(started) })
			}
		}
		once.Do(func() { close(started) })
		return true
	}
	check := servesMeanwhile(t, e, started)
	h := watchHeap()
	start := time.Now()
	status, tail := postStream(t, e, "one long line")
	grew := h.growth()
	t.Logf("endless SSE line: upstream sent %d MiB, heap grew %.1f MiB, ended after %s", sent.Load()>>20, grew, time.Since(start).Round(time.Millisecond))
	check()
	if status != 200 || !strings.Contains(tail, "stream_interrupted") || !strings.Contains(tail, "stream.max_event_bytes") {
		t.Fatalf("status %d, stream ended with %q; want an error event naming stream.max_event_bytes", status, truncate(tail, 300))
	}
	if got := sent.Load(); got > 16<<20 {
		t.Errorf("upstream sent %d MiB of one line before the cut, want about %d KiB", got>>20, limit>>10)
	}
	if grew > 32 {
		t.Errorf("heap grew by %.0f MiB during the line, want under 32 MiB (limit %d KiB)", grew, limit>>10)
	}
}

// Finding: the request deadline stopped applying once a stream was live.
// Now a stream still running at stream.max_duration ends with an error event,
// and it is not resumed on another target.
func TestStreamEndsAtTheDeadline(t *testing.T) {
	e := newEnv(t, envOptions{caller: func(o *upstream.Options) {
		o.Retry.Deadline = 500 * time.Millisecond
		o.MaxStreamDuration = time.Second
	}})
	ev := chunkEvent(8)
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if lastUser(body) != "endless" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		stop := time.After(20 * time.Second) // ends a stream the proxy fails to cut
		for r.Context().Err() == nil {
			select {
			case <-stop:
				_, _ = io.WriteString(w, "data: [DONE]\n\n")
				return true
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := w.Write(ev); err != nil || rc.Flush() != nil {
				break
			}
		}
		return true
	}
	start := time.Now()
	status, tail := postStream(t, e, "endless")
	took := time.Since(start)
	t.Logf("endless slow stream, 500ms deadline, 1s max duration: ended after %s", took.Round(time.Millisecond))
	if status != 200 || !strings.Contains(tail, "stream_interrupted") || !strings.Contains(tail, "stream.max_duration") {
		t.Fatalf("status %d after %s, stream ended with %q; want an error event naming stream.max_duration", status, took, truncate(tail, 300))
	}
	// The request deadline bounds the wait for the first byte only: the
	// stream runs on to its own limit.
	if took < time.Second || took > 10*time.Second {
		t.Errorf("stream ended after %s, want at the 1s max duration, past the 500ms deadline", took)
	}
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d (a stream cut by the deadline is not resumed)", got, want)
	}
}

// Finding: a 60 MB answer was buffered whole, cached and indexed. Now an
// answer longer than the caller's MaxAnswerBytes is relayed as it arrives,
// whole, and never cached.
func TestLongAnswerIsRelayedNotCached(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, envOptions{caller: func(o *upstream.Options) {
		o.MaxAnswerBytes = limit
		o.Retry.Deadline = time.Minute // a slow relay on a busy machine is not what this tests
	}})
	big := slices.Concat([]byte(`{"id":"chatcmpl-up","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"`),
		bytes.Repeat([]byte("z"), 32<<20), []byte(`"},"finish_reason":"stop"}]}`))
	want := sha256.Sum256(big)
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if lastUser(body) != "a very long answer" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		for rest := big; len(rest) > 0; {
			n := min(len(rest), 256<<10)
			if _, err := w.Write(rest[:n]); err != nil {
				break
			}
			rest = rest[n:]
		}
		return true
	}
	fetch := func() (int, string, [32]byte, int64) {
		req, _ := http.NewRequest(http.MethodPost, e.front.URL+"/v1/chat/completions", strings.NewReader(chat("a very long answer")))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		hash := sha256.New()
		n, _ := io.Copy(hash, resp.Body)
		var sum [32]byte
		copy(sum[:], hash.Sum(nil))
		return resp.StatusCode, resp.Header.Get(HeaderCache), sum, n
	}
	started := make(chan struct{})
	check := servesMeanwhile(t, e, started)
	h := watchHeap()
	close(started)
	status, outcome, sum, n := fetch()
	grew := h.growth()
	t.Logf("%d MiB answer: relayed %d bytes, heap grew %.1f MiB", len(big)>>20, n, grew)
	check()
	if status != 200 || sum != want {
		t.Fatalf("status %d, %d bytes; want the %d bytes the upstream sent", status, n, len(big))
	}
	if outcome != OutcomeMiss {
		t.Errorf("%s = %q, want %q", HeaderCache, outcome, OutcomeMiss)
	}
	if grew > 16 {
		t.Errorf("heap grew by %.0f MiB relaying a %d MiB answer, want under 16 MiB (limit %d MiB)", grew, len(big)>>20, limit>>20)
	}
	status, outcome, sum, _ = fetch()
	if status != 200 || sum != want || outcome != OutcomeMiss {
		t.Errorf("repeat: status %d, %s = %q; want the whole answer again, from upstream (not cached)", status, HeaderCache, outcome)
	}
	if got, want := e.model.calls.Load(), int64(3); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
	if n, _ := e.index.Len(t.Context()); n != 1 {
		t.Errorf("index entries = %d, want 1 (only the ordinary answer)", n)
	}
}

// Coalesced requests for an answer too long to share each get it whole.
func TestLongAnswerCoalescedRequestsEachGetIt(t *testing.T) {
	e := newEnv(t, envOptions{caller: func(o *upstream.Options) { o.MaxAnswerBytes = 64 << 10 }})
	big, _ := json.Marshal(completion(map[string]any{"model": "gpt-test"}, strings.Repeat("q", 1<<20)))
	release := make(chan struct{})
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if e.model.calls.Load() == 1 {
			<-release // hold the first call until the others joined it
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(big)
		return true
	}
	const n = 4
	var wg sync.WaitGroup
	got := make([]reply, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = e.post("/v1/chat/completions", chat("shared long"))
		}()
	}
	waiters := func() int {
		return e.server.flow.Waiters()
	}
	deadline := time.Now().Add(10 * time.Second)
	for waiters() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := waiters(); got < n {
		close(release)
		t.Fatalf("%d of %d requests joined the flight", got, n)
	}
	close(release)
	wg.Wait()
	for i, r := range got {
		if r.status != 200 || !bytes.Equal(r.body, big) {
			t.Errorf("request %d: status %d, %d bytes; want the whole %d-byte answer", i, r.status, len(r.body), len(big))
		}
	}
}

// Finding: with no admin token (the default) any loopback client could wipe
// every tenant's entries. Now /admin refuses unless the operator opts in.
func TestAdminRefusesWithoutToken(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.post("/v1/chat/completions", chat("keep me"))
	del := func(e *env) int {
		req, _ := http.NewRequest(http.MethodDelete, e.front.URL+"/admin/cache", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got, want := del(e), http.StatusForbidden; got != want {
		t.Fatalf("DELETE /admin/cache from loopback without a token: %d, want %d", got, want)
	}
	if r := e.post("/v1/chat/completions", chat("keep me")); r.header.Get(HeaderCache) != OutcomeHitExact {
		t.Errorf("after a refused flush: %s = %q, want the entry still cached", HeaderCache, r.header.Get(HeaderCache))
	}
	optIn := newEnv(t, envOptions{proxy: func(o *Options) { o.AdminAllowNoToken = true }})
	if got, want := del(optIn), http.StatusOK; got != want {
		t.Errorf("with AdminAllowNoToken, loopback: %d, want %d", got, want)
	}
}

// A chunked body reserves max_body_bytes while it is read and gives back
// what it did not use, so a small chunked request waiting on its upstream
// does not starve the budget.
func TestChunkedBodyGivesBackUnusedBudget(t *testing.T) {
	e := newEnv(t, envOptions{proxy: func(o *Options) { o.MaxBodyBytes = 1 << 20; o.MaxBodyBytesInFlight = 1 << 20 }})
	release := make(chan struct{})
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if lastUser(body) == "hold" {
			<-release
		}
		return false
	}
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.front.URL+"/v1/chat/completions", io.MultiReader(strings.NewReader(chat("hold"))))
		req.ContentLength = -1 // sent chunked
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.model.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r := e.post("/v1/chat/completions", chat("meanwhile"))
	close(release)
	if r.status != 200 {
		t.Errorf("a request while a small chunked one waits on its upstream: %d %s", r.status, r.body)
	}
	if got := <-done; got != 200 {
		t.Errorf("the chunked request: %d", got)
	}
	if !e.server.bodySem.TryAcquire(1 << 20) {
		t.Fatal("the budget was not given back after the requests ended")
	}
	e.server.bodySem.Release(1 << 20)
}
