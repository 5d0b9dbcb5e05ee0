package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/wire/wiretest"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/embedded"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire/apis"
)

// fakeModel is an OpenAI-compatible upstream that answers deterministically
// from the last user message and can be told to misbehave.
type fakeModel struct {
	calls atomic.Int64
	mu    sync.Mutex
	// HandleFunc, when set, answers instead of the default behaviour.
	HandleFunc func(w http.ResponseWriter, r *http.Request, body map[string]any) bool
	bodies     [][]byte
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.calls.Add(1)
	raw, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.bodies = append(m.bodies, raw)
	m.mu.Unlock()
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	if m.HandleFunc != nil && m.HandleFunc(w, r, body) {
		return
	}
	answer := "answer to: " + lastUser(body)
	if r.URL.Path == "/v1/embeddings" {
		writeJSON(w, 200, map[string]any{"object": "list", "data": []any{map[string]any{"index": 0, "embedding": []float64{0.6, 0.8}}}, "model": body["model"]})
		return
	}
	if s, _ := body["stream"].(bool); s {
		streamAnswer(w, body, answer, 0)
		return
	}
	writeJSON(w, 200, completion(body, answer))
}

func (m *fakeModel) lastBody() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.bodies) == 0 {
		return nil
	}
	return m.bodies[len(m.bodies)-1]
}

func lastUser(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] == "user" {
			s, _ := m["content"].(string)
			return s
		}
	}
	p, _ := body["prompt"].(string)
	return p
}

func completion(body map[string]any, answer string) map[string]any {
	return map[string]any{
		"id": "chatcmpl-up", "object": "chat.completion", "created": 1700000000, "model": body["model"],
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": answer}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
	}
}

// streamAnswer writes answer as SSE chunks, pausing delay between them.
func streamAnswer(w http.ResponseWriter, body map[string]any, answer string, delay time.Duration) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1700000000, "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, p := range words(answer) {
		if delay > 0 {
			time.Sleep(delay)
		}
		chunk(map[string]any{"content": p}, nil)
	}
	chunk(map[string]any{}, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// bagEmbedder is a small deterministic embedder for proxy tests: a
// bag-of-words vector, so texts sharing most words are close. Tests of the
// real encoder live in embed/ and in the app's end-to-end test.
type bagEmbedder struct {
	fail  atomic.Bool
	texts atomic.Int64 // texts embedded
}

func (b *bagEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	b.texts.Add(int64(len(texts)))
	if b.fail.Load() {
		return nil, fmt.Errorf("embedder unavailable")
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 64)
		for _, w := range strings.Fields(strings.ToLower(strings.Trim(t, "?!. "))) {
			h := fnv.New32a()
			h.Write([]byte(strings.Trim(w, "?!.,")))
			v[h.Sum32()%64]++
		}
		var n float64
		for _, x := range v {
			n += float64(x * x)
		}
		n = math.Sqrt(n)
		if n == 0 {
			v[0], n = 1, 1
		}
		for j := range v {
			v[j] /= float32(n)
		}
		out[i] = v
	}
	return out, nil
}
func (b *bagEmbedder) Dimension() int { return 64 }
func (b *bagEmbedder) Name() string   { return "test:bag" }

// failingIndex wraps an index and fails every call while down is set.
type failingIndex struct {
	cache.Index
	down       atomic.Bool
	writesDown atomic.Bool // only Upsert fails, like a full disk
}

func (f *failingIndex) Search(ctx context.Context, q cache.SearchQuery) ([]cache.Match, error) {
	if f.down.Load() {
		return nil, fmt.Errorf("index unreachable")
	}
	return f.Index.Search(ctx, q)
}

func (f *failingIndex) Upsert(ctx context.Context, items []cache.IndexItem) error {
	if f.down.Load() {
		return fmt.Errorf("index unreachable")
	}
	if f.writesDown.Load() {
		return fmt.Errorf("append to wal: write /data/index.wal: no space left on device")
	}
	return f.Index.Upsert(ctx, items)
}

type env struct {
	t        *testing.T
	model    *fakeModel
	upstream *httptest.Server
	server   *Server
	front    *httptest.Server
	cache    *cache.Cache
	index    *failingIndex
	embedder *bagEmbedder
}

type envOptions struct {
	partitionBy []string // nil: authorization + namespace
	shared      bool
	vectorPath  string
	embedder    cache.Embedder
	proxy       func(*Options)
	caller      func(*upstream.Options)
	threshold   float32
	cacheOpts   func(*cache.Options)
}

// closeEnv tears an env down for benchmarks, which build it with a bare
// testing.T whose Cleanup never runs.
func closeEnv(e *env) {
	e.front.Close()
	e.server.Close()
	_ = e.cache.Close(context.Background())
	_ = e.index.Index.Close()
	e.upstream.Close()
}

func newEnv(t *testing.T, eo envOptions) *env {
	t.Helper()
	e := &env{t: t, model: &fakeModel{}, embedder: &bagEmbedder{}}
	e.upstream = httptest.NewServer(e.model)
	t.Cleanup(e.upstream.Close)
	uo := upstream.Options{
		Upstreams:       []upstream.Upstream{{Name: "fake", BaseURL: e.upstream.URL + "/v1", Timeout: 5 * time.Second, MaxConcurrency: 16, MaxQueue: 16}},
		Routes:          []upstream.Route{{Name: "gpt-test", Targets: []upstream.Target{{Upstream: "fake", Model: "gpt-test"}}}},
		DefaultUpstream: "fake",
		Retry:           upstream.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Deadline: 5 * time.Second},
	}
	if eo.caller != nil {
		eo.caller(&uo)
	}
	caller, err := upstream.New(uo)
	if err != nil {
		t.Fatal(err)
	}
	var emb cache.Embedder = e.embedder
	if eo.embedder != nil {
		emb = eo.embedder
	}
	ix, err := embedded.Open(embedded.Options{Path: eo.vectorPath, Dimension: emb.Dimension(), EmbedderName: emb.Name()})
	if err != nil {
		t.Fatal(err)
	}
	e.index = &failingIndex{Index: ix}
	exact, err := cache.NewExact(16 << 20)
	if err != nil {
		t.Fatal(err)
	}
	th := eo.threshold
	if th == 0 {
		th = 0.9
	}
	co := cache.Options{Exact: exact, Index: e.index, Embedder: emb, Threshold: th, TTL: time.Hour}
	if eo.cacheOpts != nil {
		eo.cacheOpts(&co)
	}
	e.cache = cache.New(co)
	t.Cleanup(func() {
		_ = e.cache.Close(context.Background())
		exact.Close()
		_ = ix.Close()
	})
	by := eo.partitionBy
	if by == nil && !eo.shared {
		by = []string{cache.ByAuthorization, cache.ByNamespace}
	}
	part, err := cache.NewPartitioner([]byte("0123456789abcdef0123456789abcdef"), by)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Cache: e.cache, Caller: caller, Partitioner: part, Models: []string{"gpt-test"},
		ServerOptions: ServerOptions{MaxBodyBytes: 64 << 10}, TTL: time.Hour, CacheOptions: CacheOptions{MaxTemperature: 1},
		StreamOptions: StreamOptions{Resume: true, IdleTimeout: 2 * time.Second},
		Logger:        slog.New(slog.DiscardHandler),
		APIs:          apis.All,
	}
	if eo.proxy != nil {
		eo.proxy(&opts)
	}
	if opts.Passthrough == nil {
		opts.Passthrough = mustURL(t, e.upstream.URL+"/v1")
	}
	e.server, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.server.SetReady(true)
	t.Cleanup(e.server.Close)
	e.front = httptest.NewServer(e.server.Handler())
	t.Cleanup(e.front.Close)
	return e
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) content(t *testing.T) string {
	t.Helper()
	var c struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.body, &c); err != nil || len(c.Choices) == 0 {
		t.Fatalf("not a completion (status %d): %s", r.status, r.body)
	}
	return c.Choices[0].Message.Content
}

func (e *env) post(path, body string, headers ...string) reply {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.front.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(headers)%2 != 0 {
		e.t.Fatal("headers must come in pairs")
	}
	for i := 0; i < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) get(path string) reply {
	e.t.Helper()
	resp, err := http.Get(e.front.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// waitWaiters waits until n clients wait on coalesced (non-stream) flights,
// so a test releases the upstream only once every request has joined.
func (e *env) waitWaiters(n int) {
	e.t.Helper()
	waiters := func() int {
		return e.server.flow.Waiters()
	}
	deadline := time.Now().Add(10 * time.Second)
	for waiters() != n {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d clients wait on flights after 10s, want %d", waiters(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitStreams waits until no upstream stream is being pumped: every stream
// miss has finished and, when it was cacheable, has been written back. A
// client sees a stream end before its pump stores it, so tests that look
// for (or rule out) a stored stream wait on this, not on time.
func (e *env) waitStreams() {
	e.t.Helper()
	idle := func() bool { return e.server.flow.Pumps() == 0 }
	deadline := time.Now().Add(10 * time.Second)
	for !idle() {
		if time.Now().After(deadline) {
			e.t.Fatal("a stream was still being pumped after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitIndexed waits until the async write-back has put n entries in the index.
func (e *env) waitIndexed(n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got, _ := e.index.Len(context.Background()); got >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, _ := e.index.Len(context.Background())
	e.t.Fatalf("index has %d entries after 10s, want %d", got, n)
}

func chat(question string, extra ...string) string {
	var b bytes.Buffer
	b.WriteString(`{"model":"gpt-test","messages":[`)
	for _, sys := range extra {
		b.WriteString(`{"role":"system","content":` + quote(sys) + `},`)
	}
	b.WriteString(`{"role":"user","content":` + quote(question) + `}]}`)
	return b.String()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

var readFile = os.ReadFile

func (f *failingIndex) Get(ctx context.Context, key string) (cache.Entry, bool, error) {
	if f.down.Load() {
		return cache.Entry{}, false, fmt.Errorf("index unreachable")
	}
	return f.Index.Get(ctx, key)
}

func (f *failingIndex) Len(ctx context.Context) (int, error) {
	if f.down.Load() {
		return 0, fmt.Errorf("index unreachable")
	}
	return f.Index.Len(ctx)
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return ctx, cancel
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// jsonEqual: the shared helper (wiretest).
var jsonEqual = wiretest.JSONEqual
