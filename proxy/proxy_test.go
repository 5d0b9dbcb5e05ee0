package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestExactHitOnRepeat(t *testing.T) {
	e := newEnv(t, envOptions{})
	first := e.post("/v1/chat/completions", chat("What is the boiling point of water?"), "Authorization", "Bearer A")
	if got, want := first.status, 200; got != want {
		t.Fatalf("status %d, want %d: %s", got, want, first.body)
	}
	if got, want := first.header.Get(HeaderCache), OutcomeMiss; got != want {
		t.Errorf("first %s = %q, want %q", HeaderCache, got, want)
	}
	second := e.post("/v1/chat/completions", chat("What is the boiling point of water?"), "Authorization", "Bearer A")
	if got, want := second.header.Get(HeaderCache), OutcomeHitExact; got != want {
		t.Errorf("repeat %s = %q, want %q", HeaderCache, got, want)
	}
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
	if got, want := second.content(t), first.content(t); got != want {
		t.Errorf("hit content %q, want %q", got, want)
	}
	if second.header.Get("Age") == "" {
		t.Error("hit has no Age header")
	}
	// A hit is a fresh completion to the client: new id, not the upstream's.
	var c struct{ ID string }
	_ = json.Unmarshal(second.body, &c)
	if c.ID == "chatcmpl-up" || !strings.HasPrefix(c.ID, "chatcmpl-") {
		t.Errorf("hit id %q: want a fresh chatcmpl- id", c.ID)
	}
	if id := second.header.Get(HeaderRequestID); id == "" {
		t.Error("no X-Request-ID on the response")
	}
}

func TestKeyIgnoresStreamFlagAndKeyOrder(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.post("/v1/chat/completions", `{"model":"gpt-test","messages":[{"role":"user","content":"hi there"}],"temperature":0}`)
	for _, body := range []string{
		`{"temperature":0,"messages":[{"content":"hi there","role":"user"}],"model":"gpt-test"}`,
		`{ "model" : "gpt-test", "messages":[{"role":"user","content":"hi there"}], "temperature":0, "stream":false, "user":"u-42" }`,
	} {
		r := e.post("/v1/chat/completions", body)
		if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
			t.Errorf("%s: %s = %q, want %q", body, HeaderCache, got, want)
		}
	}
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

// A semantic hit decided by the static threshold is served again from the
// semantic tier, never laundered into the exact tier under the asker's key
// (issue 42: a poisoned match would otherwise hold for the whole TTL).
func TestUnverifiedSemanticHitIsNotPromoted(t *testing.T) {
	e := newEnv(t, envOptions{threshold: 0.8})
	e.post("/v1/chat/completions", chat("How do I reset my password?"))
	e.waitIndexed(1)
	para := e.post("/v1/chat/completions", chat("How can I reset my password?"))
	if got, want := para.header.Get(HeaderCache), OutcomeHitSemantic; got != want {
		t.Fatalf("paraphrase %s = %q, want %q", HeaderCache, got, want)
	}
	sim, err := strconv.ParseFloat(para.header.Get(HeaderSimilarity), 64)
	if err != nil || sim < 0.8 || sim > 1 {
		t.Errorf("%s = %q, want a similarity in [0.8, 1]", HeaderSimilarity, para.header.Get(HeaderSimilarity))
	}
	if got, want := para.content(t), "answer to: How do I reset my password?"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	again := e.post("/v1/chat/completions", chat("How can I reset my password?"))
	if got, want := again.header.Get(HeaderCache), OutcomeHitSemantic; got != want {
		t.Errorf("paraphrase repeated: %s = %q, want %q (not promoted)", HeaderCache, got, want)
	}
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

func TestTenantsNeverShare(t *testing.T) {
	e := newEnv(t, envOptions{threshold: 0.8})
	e.post("/v1/chat/completions", chat("How do I reset my password?"), "Authorization", "Bearer tenant-A")
	e.waitIndexed(1)
	for _, tc := range []struct {
		name     string
		question string
		headers  []string
	}{
		// Each case is a tenant of its own: a miss stores the tenant's own
		// entry, which a later case must not mistake for a leak.
		{"exact, other key", "How do I reset my password?", []string{"Authorization", "Bearer tenant-B"}},
		{"semantic, other key", "How can I reset my password?", []string{"Authorization", "Bearer tenant-C"}},
		{"exact, no key", "How do I reset my password?", nil},
		{"exact, same key other namespace", "How do I reset my password?", []string{"Authorization", "Bearer tenant-A", HeaderNamespace, "team-2"}},
		{"semantic, same key other namespace", "How can I reset my password?", []string{"Authorization", "Bearer tenant-A", HeaderNamespace, "team-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.model.calls.Load()
			r := e.post("/v1/chat/completions", chat(tc.question), tc.headers...)
			if got := r.header.Get(HeaderCache); got != OutcomeMiss {
				t.Errorf("%s = %q: tenant received another tenant's entry", HeaderCache, got)
			}
			if got, want := e.model.calls.Load()-before, int64(1); got != want {
				t.Errorf("upstream calls = %d, want %d", got, want)
			}
		})
	}
	// The owner still hits.
	r := e.post("/v1/chat/completions", chat("How do I reset my password?"), "Authorization", "Bearer tenant-A")
	if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
		t.Errorf("owner: %s = %q, want %q", HeaderCache, got, want)
	}
}

func TestSharedModeIsOptIn(t *testing.T) {
	e := newEnv(t, envOptions{shared: true, partitionBy: []string{}})
	e.post("/v1/chat/completions", chat("What is 2+2?"), "Authorization", "Bearer A")
	r := e.post("/v1/chat/completions", chat("What is 2+2?"), "Authorization", "Bearer B")
	if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
		t.Errorf("shared mode: %s = %q, want %q", HeaderCache, got, want)
	}
}

func TestContextScopesSemanticHits(t *testing.T) {
	e := newEnv(t, envOptions{threshold: 0.8})
	e.post("/v1/chat/completions", chat("How do I reset my password?", "You are a bank's assistant."))
	e.waitIndexed(1)
	for _, tc := range []struct{ name, body string }{
		{"other system prompt", chat("How can I reset my password?", "You are a game's assistant.")},
		{"no system prompt", chat("How can I reset my password?")},
		{"earlier turns", `{"model":"gpt-test","messages":[{"role":"system","content":"You are a bank's assistant."},{"role":"user","content":"hello"},{"role":"assistant","content":"hi"},{"role":"user","content":"How can I reset my password?"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("/v1/chat/completions", tc.body)
			if got := r.header.Get(HeaderCache); got != OutcomeMiss {
				t.Errorf("%s = %q, want miss: different context must not match", HeaderCache, got)
			}
		})
	}
	r := e.post("/v1/chat/completions", chat("How can I reset my password?", "You are a bank's assistant."))
	if got, want := r.header.Get(HeaderCache), OutcomeHitSemantic; got != want {
		t.Errorf("same context: %s = %q, want %q", HeaderCache, got, want)
	}
}

func TestRestartKeepsCache(t *testing.T) {
	dir := t.TempDir()
	e1 := newEnv(t, envOptions{vectorPath: dir})
	e1.post("/v1/chat/completions", chat("Where is the Eiffel Tower?"))
	e1.waitIndexed(1)
	// Close flushes and closes the store, as a shutdown would.
	if err := e1.cache.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e1.index.Index.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, envOptions{vectorPath: dir})
	r := e2.post("/v1/chat/completions", chat("Where is the Eiffel Tower?"))
	if got := r.header.Get(HeaderCache); got != OutcomeHitSemantic && got != OutcomeHitExact {
		t.Errorf("after restart %s = %q, want a hit", HeaderCache, got)
	}
	if got, want := e2.model.calls.Load(), int64(0); got != want {
		t.Errorf("upstream calls after restart = %d, want %d", got, want)
	}
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		status  int
		code    string
	}{
		{"invalid json", `{"model":`, nil, 400, "invalid_json"},
		{"not an object", `[1,2]`, nil, 400, ""},
		{"no messages", `{"model":"gpt-test"}`, nil, 400, "invalid_request"},
		{"oversize", `{"model":"gpt-test","messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`, nil, 413, "request_too_large"},
		{"bad threshold header", chat("q"), []string{HeaderThreshold, "2"}, 400, "invalid_header"},
		{"bad max-age", chat("q"), []string{"Cache-Control", "max-age=soon"}, 400, "invalid_header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("/v1/chat/completions", tc.body, tc.headers...)
			if got, want := r.status, tc.status; got != want {
				t.Fatalf("status %d, want %d: %s", got, want, r.body)
			}
			var eb apiError
			if err := json.Unmarshal(r.body, &eb); err != nil || eb.Error.Message == "" || eb.Error.Type == "" {
				t.Fatalf("not an OpenAI-shaped error: %s", r.body)
			}
			if tc.code != "" && eb.Error.Code != tc.code {
				t.Errorf("code %q, want %q", eb.Error.Code, tc.code)
			}
		})
	}
	if got := e.model.calls.Load(); got != 0 {
		t.Errorf("bad requests reached the upstream %d times", got)
	}
}

func TestUnknownModelIsForwardedUnchanged(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.post("/v1/chat/completions", `{"model":"some-other-model","messages":[{"role":"user","content":"hi"}]}`)
	if got, want := r.status, 200; got != want {
		t.Fatalf("status %d: %s", got, r.body)
	}
	var sent map[string]any
	_ = json.Unmarshal(e.model.lastBody(), &sent)
	if got, want := sent["model"], "some-other-model"; got != want {
		t.Errorf("upstream saw model %v, want %v", got, want)
	}
}

func TestUpstream4xxPassedThroughNotCached(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "max_tokens is too large", "type": "invalid_request_error", "code": "bad_max_tokens"}})
		return true
	}
	for i := 0; i < 2; i++ {
		r := e.post("/v1/chat/completions", chat("q"))
		if got, want := r.status, 400; got != want {
			t.Fatalf("status %d, want %d", got, want)
		}
		if !strings.Contains(string(r.body), "max_tokens is too large") {
			t.Errorf("upstream error body not passed through: %s", r.body)
		}
	}
	if got, want := e.model.calls.Load(), int64(2); got != want {
		t.Errorf("upstream calls = %d, want %d (4xx never cached, never retried)", got, want)
	}
}

func TestUnfinishedAnswersNotCached(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		c := completion(body, "partial")
		c["choices"].([]any)[0].(map[string]any)["finish_reason"] = "content_filter"
		writeJSON(w, 200, c)
		return true
	}
	e.post("/v1/chat/completions", chat("q"))
	r := e.post("/v1/chat/completions", chat("q"))
	if got, want := r.header.Get(HeaderCache), OutcomeMiss; got != want {
		t.Errorf("%s = %q, want %q: a filtered answer was cached", HeaderCache, got, want)
	}
}

func TestCacheControl(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.post("/v1/chat/completions", chat("cc question"))
	r := e.post("/v1/chat/completions", chat("cc question"), "Cache-Control", "no-cache")
	if got := r.header.Get(HeaderCache); got == OutcomeHitExact {
		t.Errorf("no-cache served a hit")
	}
	r = e.post("/v1/chat/completions", chat("nostore question"), "Cache-Control", "no-store")
	r = e.post("/v1/chat/completions", chat("nostore question"))
	if got, want := r.header.Get(HeaderCache), OutcomeMiss; got != want {
		t.Errorf("after no-store: %s = %q, want %q", HeaderCache, got, want)
	}
	time.Sleep(1100 * time.Millisecond)
	r = e.post("/v1/chat/completions", chat("cc question"), "Cache-Control", "max-age=1")
	if got, want := r.header.Get(HeaderCache), OutcomeMiss; got != want {
		t.Errorf("max-age=1 on an older entry: %s = %q, want %q", HeaderCache, got, want)
	}
	r = e.post("/v1/chat/completions", chat("cc question"), "Cache-Control", "max-age=60")
	if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
		t.Errorf("max-age=60: %s = %q, want %q", HeaderCache, got, want)
	}
}

func TestThresholdHeaderOnlyRaises(t *testing.T) {
	e := newEnv(t, envOptions{threshold: 0.8})
	e.post("/v1/chat/completions", chat("How do I reset my password?"))
	e.waitIndexed(1)
	r := e.post("/v1/chat/completions", chat("How can I reset my password?"), HeaderThreshold, "0.999")
	if got, want := r.header.Get(HeaderCache), OutcomeMiss; got != want {
		t.Errorf("raised threshold: %s = %q, want %q", HeaderCache, got, want)
	}
	r = e.post("/v1/chat/completions", chat("How can I change my username?"), HeaderThreshold, "0.01")
	if got, want := r.header.Get(HeaderCache), OutcomeMiss; got != want {
		t.Errorf("a header must not lower the threshold: %s = %q, want %q", HeaderCache, got, want)
	}
}

func TestHighTemperatureBypasses(t *testing.T) {
	e := newEnv(t, envOptions{})
	body := `{"model":"gpt-test","temperature":1.5,"messages":[{"role":"user","content":"write a poem"}]}`
	e.post("/v1/chat/completions", body)
	r := e.post("/v1/chat/completions", body)
	if got, want := r.header.Get(HeaderCache), OutcomeBypass; got != want {
		t.Errorf("%s = %q, want %q", HeaderCache, got, want)
	}
	if got, want := e.model.calls.Load(), int64(2); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

func TestDegradedTiersStillServe(t *testing.T) {
	for _, which := range []string{"embedder", "index"} {
		t.Run(which, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.post("/v1/chat/completions", chat("cached before the outage"))
			if which == "embedder" {
				e.embedder.fail.Store(true)
			} else {
				e.index.down.Store(true)
			}
			r := e.post("/v1/chat/completions", chat("a new question during the outage"))
			if got, want := r.status, 200; got != want {
				t.Fatalf("miss during %s outage: status %d", which, got)
			}
			r = e.post("/v1/chat/completions", chat("cached before the outage"))
			if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
				t.Errorf("exact tier during %s outage: %s = %q, want %q", which, HeaderCache, got, want)
			}
			ready := e.get("/readyz")
			if got, want := ready.status, 200; got != want {
				t.Errorf("/readyz status %d, want %d (degraded still serves)", got, want)
			}
			if !strings.Contains(string(ready.body), `"degraded"`) || !strings.Contains(string(ready.body), which) {
				t.Errorf("/readyz does not name the %s: %s", which, ready.body)
			}
			// Back up: /readyz rechecks the component itself, no traffic needed.
			e.embedder.fail.Store(false)
			e.index.down.Store(false)
			if ready := e.get("/readyz"); !strings.Contains(string(ready.body), `"ready"`) {
				t.Errorf("/readyz after recovery: %s", ready.body)
			}
		})
	}
}

func TestCoalescesIdenticalMisses(t *testing.T) {
	e := newEnv(t, envOptions{})
	release := make(chan struct{})
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		<-release
		return false
	}
	const n = 8
	var wg sync.WaitGroup
	replies := make([]reply, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = e.post("/v1/chat/completions", chat("the same slow question"))
		}()
	}
	// Let every request arrive and join the flight before answering.
	e.waitWaiters(n)
	close(release)
	wg.Wait()
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
	for i, r := range replies {
		if r.status != 200 {
			t.Errorf("reply %d: status %d", i, r.status)
		}
	}
	st := e.server.Snapshot()
	if got, want := st.Upstream.Coalesced, uint64(n-1); got != want {
		t.Errorf("coalesced = %d, want %d", got, want)
	}
}

func TestStatsHitRate(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.post("/v1/chat/completions", chat("one"))
	e.post("/v1/chat/completions", chat("one"))
	e.post("/v1/chat/completions", chat("one"))
	e.post("/v1/chat/completions", `{"model":"gpt-test","temperature":2,"messages":[{"role":"user","content":"x"}]}`)
	r := e.get("/stats")
	var st Stats
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	if got, want := st.Requests, uint64(4); got != want {
		t.Errorf("requests = %d, want %d", got, want)
	}
	if got, want := st.HitsExact, uint64(2); got != want {
		t.Errorf("hits_exact = %d, want %d", got, want)
	}
	if got, want := st.Bypass, uint64(1); got != want {
		t.Errorf("bypass = %d, want %d", got, want)
	}
	if got, want := st.HitRate, 2.0/3.0; fmt.Sprintf("%.4f", got) != fmt.Sprintf("%.4f", want) {
		t.Errorf("hit_rate = %v, want %v (hits / eligible)", got, want)
	}
	if got, want := st.Upstream.Saved, uint64(2); got != want {
		t.Errorf("upstream.saved = %d, want %d", got, want)
	}
	if got, want := st.Entries.Exact, 1; got < want {
		t.Errorf("entries.exact = %d, want >= %d", got, want)
	}
	if len(st.Models) == 0 || len(st.Models[0].Targets) == 0 {
		t.Errorf("no model/target stats: %s", r.body)
	}
	for _, k := range []string{`"requests"`, `"hits_exact"`, `"hits_semantic"`, `"misses"`, `"bypass"`, `"stale"`, `"hit_rate"`, `"calls"`, `"saved"`, `"coalesced"`, `"rate_limited"`, `"timeouts"`, `"errors"`, `"entries"`, `"models"`, `"success_rate"`, `"latency_ms"`, `"p50"`, `"p99"`, `"inflight"`, `"queued"`, `"state"`, `"weight"`} {
		if !strings.Contains(string(r.body), k) {
			t.Errorf("/stats lacks %s", k)
		}
	}
}

func TestModelsAndForward(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.get("/v1/models")
	if !strings.Contains(string(r.body), `"gpt-test"`) {
		t.Errorf("/v1/models = %s", r.body)
	}
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if r.URL.Path == "/v1/files" {
			writeJSON(w, 200, map[string]any{"object": "list", "data": []any{}, "seen_query": r.URL.RawQuery})
			return true
		}
		return false
	}
	r = e.get("/v1/files?purpose=batch")
	if r.status != 200 || !strings.Contains(string(r.body), "purpose=batch") {
		t.Errorf("forward /v1/files: %d %s", r.status, r.body)
	}
	if got, want := r.header.Get(HeaderCache), OutcomeBypass; got != want {
		t.Errorf("forward %s = %q, want %q", HeaderCache, got, want)
	}
}

func TestEmbeddingsExactCache(t *testing.T) {
	e := newEnv(t, envOptions{})
	body := `{"model":"text-embedding-3-small","input":"hello"}`
	e.post("/v1/embeddings", body)
	r := e.post("/v1/embeddings", body)
	if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
		t.Errorf("%s = %q, want %q", HeaderCache, got, want)
	}
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

func TestAdminFlush(t *testing.T) {
	e := newEnv(t, envOptions{proxy: func(o *Options) { o.AdminToken = "s3cret" }})
	e.post("/v1/chat/completions", chat("flush me"))
	req, _ := http.NewRequest(http.MethodDelete, e.front.URL+"/admin/cache", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, 401; got != want {
		t.Fatalf("flush without token: %d, want %d", got, want)
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, 200; got != want {
		t.Fatalf("flush with token: %d, want %d", got, want)
	}
	r := e.post("/v1/chat/completions", chat("flush me"))
	if got, want := r.header.Get(HeaderCache), OutcomeMiss; got != want {
		t.Errorf("after flush: %s = %q, want %q", HeaderCache, got, want)
	}
}

func TestReadyzDuringShutdown(t *testing.T) {
	e := newEnv(t, envOptions{})
	if got, want := e.get("/readyz").status, 200; got != want {
		t.Fatalf("/readyz while serving: %d, want %d", got, want)
	}
	e.server.SetReady(false) // what App.Shutdown does first
	if got, want := e.get("/readyz").status, 503; got != want {
		t.Errorf("/readyz while shutting down: %d, want %d", got, want)
	}
	if got, want := e.get("/healthz").status, 200; got != want {
		t.Errorf("/healthz while shutting down: %d, want %d (the process is alive)", got, want)
	}
}
