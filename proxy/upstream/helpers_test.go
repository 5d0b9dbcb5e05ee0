package upstream

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// seen is one request as an upstream received it.
type seen struct {
	body   string
	header http.Header
	path   string
	at     time.Time
}

// fakeUpstream is a real HTTP server whose handler misbehaves on purpose; it
// records every request it receives.
type fakeUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

// startUpstream serves handle, passing the 1-based number of the request.
func startUpstream(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{body: string(body), header: r.Header.Clone(), path: r.URL.RequestURI(), at: time.Now()})
		n := len(f.reqs)
		f.mu.Unlock()
		handle(w, r, n)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeUpstream) calls() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func (f *fakeUpstream) count() int { return len(f.calls()) }

// url is the API root, as an operator would configure it.
func (f *fakeUpstream) url() string { return f.URL + "/v1" }

func ok(w http.ResponseWriter, r *http.Request, _ int) {
	reply(w, 200, `{"id":"chatcmpl-1","object":"chat.completion"}`)
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

// always answers status every time.
func always(status int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		reply(w, status, fmt.Sprintf(`{"error":{"message":"status %d","type":"test"}}`, status))
	}
}

// fastRetry keeps test waits short.
var fastRetry = RetryPolicy{MaxAttempts: 3, BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Deadline: 5 * time.Second}

func newCaller(t *testing.T, opts Options) *Caller {
	t.Helper()
	if opts.Retry.Deadline == 0 && opts.Retry.MaxAttempts == 0 {
		opts.Retry = fastRetry
	}
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// seeded returns a deterministic, concurrency-safe Rand.
func seeded(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

func chat(model string) *Request {
	return &Request{
		Path: "/v1/chat/completions", Model: model, RequestID: "req-42",
		Body:   []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`),
		Header: http.Header{"Authorization": {"Bearer sk-client"}},
	}
}

// oneTarget routes "gpt-4o" to a single upstream at url.
func oneTarget(url string) Options {
	return Options{
		Upstreams: []Upstream{{Name: "a", BaseURL: url}},
		Routes:    []Route{{Name: "gpt-4o", Targets: []Target{{Upstream: "a"}}}},
	}
}

// twoTargets routes "gpt-4o" to a (priority 0) then b (priority 1, model gpt-4o-mini).
func twoTargets(a, b string) Options {
	return Options{
		Upstreams: []Upstream{{Name: "a", BaseURL: a}, {Name: "b", BaseURL: b}},
		Routes: []Route{{Name: "gpt-4o", Targets: []Target{
			{Upstream: "a", Model: "gpt-4o", Priority: 0},
			{Upstream: "b", Model: "gpt-4o-mini", Priority: 1},
		}}},
	}
}

func statsOf(t *testing.T, c *Caller, model, target string) TargetStats {
	t.Helper()
	for _, m := range c.Snapshot() {
		if m.Name != model {
			continue
		}
		for _, ts := range m.Targets {
			if ts.Name == target {
				return ts
			}
		}
	}
	t.Fatalf("no stats for %s / %s", model, target)
	return TargetStats{}
}
