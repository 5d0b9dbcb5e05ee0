package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// Issue 4, "Stale serving when every target is down and a near match exists".

const (
	staleCached     = "What is the capital of France?"
	staleParaphrase = "Tell me the capital of France"
	staleUnrelated  = "How do volcanoes erupt under the ocean?"
)

// staleEnv builds an env whose model routes to two targets, the fake model
// (priority 0) and a backup (priority 1). Both answer 503 once down is set;
// the fake model answers normally before that, so an answer can be cached.
func staleEnv(t *testing.T, staleIfError bool) (e *env, down *atomic.Bool, backupCalls *atomic.Int64) {
	t.Helper()
	down, backupCalls = &atomic.Bool{}, &atomic.Int64{}
	unavailable := func(w http.ResponseWriter) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
			"message": "no healthy upstream", "type": "server_error", "param": nil, "code": "unavailable"}})
	}
	backup := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backupCalls.Add(1)
		unavailable(w)
	}))
	e = newEnv(t, envOptions{
		caller: func(o *upstream.Options) {
			o.Upstreams = append(o.Upstreams, upstream.Upstream{Name: "backup", BaseURL: backup + "/v1", Timeout: 5 * time.Second})
			o.Routes = []upstream.Route{{Name: "gpt-test", Targets: []upstream.Target{
				{Upstream: "fake", Model: "gpt-test", Priority: 0},
				{Upstream: "backup", Model: "gpt-test", Priority: 1},
			}}}
			o.Breaker = upstream.BreakerOptions{ConsecutiveFailures: 2, OpenFor: time.Minute}
		},
		proxy: func(o *Options) {
			o.StaleIfError = staleIfError
			o.StaleThreshold = 0.5
		},
	})
	// Set before the first request: the handler reads it without a lock.
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if !down.Load() {
			return false
		}
		unavailable(w)
		return true
	}
	return e, down, backupCalls
}

// seedStale caches the answer to staleCached, checks the paraphrase sits
// between StaleThreshold and the normal threshold, and takes every target down.
func seedStale(t *testing.T, e *env, down *atomic.Bool) {
	t.Helper()
	if got, want := e.post("/v1/chat/completions", chat(staleCached)).status, http.StatusOK; got != want {
		t.Fatalf("seeding: status %d, want %d", got, want)
	}
	e.waitIndexed(1)
	if sim := bagSimilarity(t, e, staleCached, staleParaphrase); sim < 0.5 || sim >= 0.9 {
		t.Fatalf("test premise: similarity(cached, paraphrase) = %.3f, want in [0.5, 0.9): below the hit threshold, above the stale one", sim)
	}
	if sim := bagSimilarity(t, e, staleCached, staleUnrelated); sim >= 0.5 {
		t.Fatalf("test premise: similarity(cached, unrelated) = %.3f, want < 0.5", sim)
	}
	down.Store(true)
}

func bagSimilarity(t *testing.T, e *env, a, b string) float64 {
	t.Helper()
	v, err := e.embedder.Embed(t.Context(), []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	var dot float64
	for i := range v[0] {
		dot += float64(v[0][i] * v[1][i])
	}
	return dot
}

// checkAPIError asserts an error answer a client can act on: Retry-After in
// whole seconds (at least 1) and an OpenAI-shaped body.
func checkAPIError(t *testing.T, r reply) {
	t.Helper()
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("status %d: Retry-After = %q, want whole seconds >= 1", r.status, r.header.Get("Retry-After"))
	}
	var body struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Error == nil || body.Error.Message == "" || body.Error.Type == "" || body.Error.Code == "" {
		t.Errorf("status %d: body is not an OpenAI error {error:{message,type,code}}: %s", r.status, r.body)
	}
}

func TestStaleServedWhenEveryTargetIsDown(t *testing.T) {
	e, down, backupCalls := staleEnv(t, true)
	seedStale(t, e, down)

	// The first request tries both targets (2 attempts each) and opens both
	// breakers; later ones find every breaker open. Both ways: stale.
	var upstreamBefore, upstreamAfter int64
	for i := range 3 {
		upstreamBefore = e.model.calls.Load() + backupCalls.Load()
		r := e.post("/v1/chat/completions", chat(staleParaphrase))
		upstreamAfter = e.model.calls.Load() + backupCalls.Load()
		if got, want := r.status, http.StatusOK; got != want {
			t.Fatalf("request %d: status %d, want %d: %s", i, got, want, r.body)
		}
		if got, want := r.header.Get(HeaderCache), OutcomeStale; got != want {
			t.Errorf("request %d: %s = %q, want %q", i, HeaderCache, got, want)
		}
		sim, err := strconv.ParseFloat(r.header.Get(HeaderSimilarity), 64)
		if err != nil || sim < 0.5 || sim >= 0.9 {
			t.Errorf("request %d: %s = %q, want a similarity in [0.5, 0.9)", i, HeaderSimilarity, r.header.Get(HeaderSimilarity))
		}
		if got, want := r.content(t), "answer to: "+staleCached; got != want {
			t.Errorf("request %d: content %q, want the cached answer %q", i, got, want)
		}
	}
	if upstreamAfter != upstreamBefore {
		t.Errorf("upstream calls went %d -> %d on the last request; want none once both breakers are open", upstreamBefore, upstreamAfter)
	}
	if backupCalls.Load() == 0 {
		t.Error("the backup target was never tried: stale must come only after every target failed")
	}

	t.Run("stream", func(t *testing.T) {
		got, h, err := streamChat(t, e, staleParaphrase)
		if err != nil {
			t.Fatalf("stale stream: %v", err)
		}
		if got, want := h.Get(HeaderCache), OutcomeStale; got != want {
			t.Errorf("%s = %q, want %q", HeaderCache, got, want)
		}
		if h.Get(HeaderSimilarity) == "" {
			t.Errorf("%s missing on a stale replay", HeaderSimilarity)
		}
		if want := "answer to: " + staleCached; got != want {
			t.Errorf("replayed %q, want %q", got, want)
		}
	})

	t.Run("no near match", func(t *testing.T) {
		r := e.post("/v1/chat/completions", chat(staleUnrelated))
		if got, want := r.status, http.StatusServiceUnavailable; got != want {
			t.Fatalf("status %d, want %d: %s", got, want, r.body)
		}
		if got := r.header.Get(HeaderCache); got == OutcomeStale {
			t.Errorf("%s = %q for an unrelated question", HeaderCache, got)
		}
		checkAPIError(t, r)
	})
}

func TestStaleDisabledAnswers503(t *testing.T) {
	e, down, _ := staleEnv(t, false)
	seedStale(t, e, down)
	r := e.post("/v1/chat/completions", chat(staleParaphrase))
	if got, want := r.status, http.StatusServiceUnavailable; got != want {
		t.Fatalf("status %d, want %d: %s", got, want, r.body)
	}
	if got := r.header.Get(HeaderCache); got == OutcomeStale {
		t.Errorf("%s = %q with stale_if_error off", HeaderCache, got)
	}
	checkAPIError(t, r)

	_, _, err := streamChat(t, e, staleParaphrase)
	if err == nil || !strings.Contains(err.Error(), "status 503") {
		t.Errorf("stream request with every target down and stale_if_error off: %v, want status 503", err)
	}
}
