package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/lib/judgeprompt"
	"github.com/breakwater-dev/breakwater/lib/logtest"
)

// model is an OpenAI-compatible upstream answering from the last user turn,
// and the default judge's prompts with a verdict (sameQuestion).
type model struct {
	calls  atomic.Int64 // questions asked (not judge prompts)
	judged atomic.Int64 // judge prompts asked
	status int          // non-zero: answer every request with this status
}

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	judge := len(body.Messages) == 2 && body.Messages[0].Role == "system" && strings.Contains(body.Messages[0].Content, "<question-A-")
	if judge {
		m.judged.Add(1)
	} else {
		m.calls.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	if m.status != 0 {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(m.status)
		if m.status == http.StatusTooManyRequests {
			fmt.Fprint(w, `{"error":{"message":"model is at capacity","type":"rate_limit_error","code":"rate_limited"}}`)
		} else {
			fmt.Fprint(w, `{"error":{"message":"the model crashed","type":"server_error","code":"internal"}}`)
		}
		return
	}
	q := ""
	if n := len(body.Messages); n > 0 {
		q = body.Messages[n-1].Content
	}
	if judge {
		// The default judge's prompt: a verdict, as a model gives it.
		q = judgeprompt.Naive(body.Messages[0].Content, q, sameQuestion)
		fmt.Fprintf(w, `{"id":"chatcmpl-judge","object":"chat.completion","created":1700000000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":90,"completion_tokens":6,"total_tokens":96}}`, body.Model, q)
		return
	}
	fmt.Fprintf(w, `{"id":"chatcmpl-up","object":"chat.completion","created":1700000000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`, body.Model, "answer to: "+q)
}

// paraphrases are the questions the app tests ask in other words.
var paraphrases = map[string]string{"how can i reset my password": "how do i reset my password"}

// sameQuestion is the model's reading of two questions: the same when their
// words are (case and punctuation aside), or one is the other's paraphrase.
func sameQuestion(a, b string) bool {
	norm := func(q string) string {
		w := strings.Join(strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }), " ")
		if p, ok := paraphrases[w]; ok {
			return p
		}
		return w
	}
	return norm(a) == norm(b)
}

type running struct {
	url    string
	app    *App
	cancel context.CancelFunc
	done   chan error
}

// start runs Breakwater from a TOML config (with {{UP1}}, {{UP2}} and
// {{DATA}} substituted) on a loopback port, with no environment variables.
func start(t *testing.T, toml string, ups ...string) *running {
	t.Helper()
	return startEnv(t, func(string) string { return "" }, toml, ups...)
}

// startEnv is start with env as the process environment (for *_env keys).
// It returns once the vector index has opened (or failed to).
func startEnv(t *testing.T, env func(string) string, toml string, ups ...string) *running {
	t.Helper()
	r := launch(t, env, toml, ups...)
	select {
	case <-r.app.IndexOpened():
	case <-time.After(10 * time.Second):
		t.Fatal("the vector index did not open within 10s")
	}
	return r
}

// launch is startEnv without waiting for the index.
func launch(t *testing.T, env func(string) string, toml string, ups ...string) *running {
	t.Helper()
	dir := t.TempDir()
	toml = strings.ReplaceAll(toml, "{{DATA}}", filepath.ToSlash(dir))
	for i, u := range ups {
		toml = strings.ReplaceAll(toml, fmt.Sprintf("{{UP%d}}", i+1), u)
	}
	path := filepath.Join(dir, "breakwater.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, env)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(t.Context(), cfg, Options{Logger: slog.New(slog.DiscardHandler), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{url: "http://" + ln.Addr().String(), app: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Serve(ctx, ln) }()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
	r.done <- nil // later stops return at once
}

func (r *running) chat(t *testing.T, question string, headers ...string) (int, http.Header, string) {
	t.Helper()
	body := `{"model":"gpt-test","messages":[{"role":"user","content":` + jsonString(question) + `}]}`
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func (r *running) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get(r.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const baseConfig = `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
[cache]
data_dir = "{{DATA}}"
threshold = %s
[retry]
max_attempts = 2
base_delay = "1ms"
max_delay = "5ms"
deadline = "10s"
[breaker]
consecutive_failures = 2
open_for = "1m"
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
[[upstreams]]
name = "fallback"
base_url = "{{UP2}}/v1"
[[models]]
name = "gpt-test"
targets = [{upstream = "primary", priority = 0}, {upstream = "fallback", priority = 1}]
`

// noSampling turns off the live false-hit sampling, which answers a random
// share (cache/verify.DefaultSampleRate) of would-be semantic hits fresh as
// "miss-sampled". Tests that assert a semantic hit append it; otherwise one
// run in fifty fails.
const noSampling = `
[cache.verify]
sample_rate = 0
`

// waitFor polls cond for up to 10 s (the write-back queue is asynchronous).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestEndToEndBuiltinEncoder runs the sidecar as the README's first command
// does (built-in encoder, embedded index) and checks the walking skeleton:
// miss, exact hit, paraphrase hit with the real encoder, tenant isolation,
// and a restart that keeps the cache.
func TestEndToEndBuiltinEncoder(t *testing.T) {
	up := &model{}
	us := httptest.NewServer(up)
	defer us.Close()
	cfg := fmt.Sprintf(baseConfig, "0.93") + noSampling // the default threshold
	r := start(t, cfg, us.URL, us.URL)

	_, h, _ := r.chat(t, "How do I reset my password?", "Authorization", "Bearer tenant-A")
	if got, want := h.Get("X-Breakwater-Cache"), "miss"; got != want {
		t.Fatalf("first: %q, want %q", got, want)
	}
	_, h, _ = r.chat(t, "How do I reset my password?", "Authorization", "Bearer tenant-A")
	if got, want := h.Get("X-Breakwater-Cache"), "hit-exact"; got != want {
		t.Errorf("repeat: %q, want %q", got, want)
	}
	// Wait for the write-back queue to index the first answer, then probe
	// once: a probe sent before that would miss and be stored under its own
	// exact key, so a retried probe would be an exact hit, never semantic.
	waitFor(t, "the first answer to be indexed", func() bool {
		return strings.Contains(r.get(t, "/stats"), `"semantic":1`)
	})
	_, h2, body := r.chat(t, "How can I reset my password?", "Authorization", "Bearer tenant-A")
	if got, want := h2.Get("X-Breakwater-Cache"), "hit-semantic"; got != want {
		t.Fatalf("paraphrase: %q, want %q: %s", got, want, body)
	}
	if !strings.Contains(body, "answer to: How do I reset my password?") {
		t.Errorf("semantic hit body %s", body)
	}
	if h2.Get("X-Breakwater-Similarity") == "" {
		t.Error("semantic hit without X-Breakwater-Similarity")
	}
	_, h, _ = r.chat(t, "How can I reset my password?", "Authorization", "Bearer tenant-B")
	if got := h.Get("X-Breakwater-Cache"); got != "miss" {
		t.Errorf("tenant B got %q for tenant A's question, want miss", got)
	}
	calls := up.calls.Load()
	if calls != 2 {
		t.Errorf("upstream calls = %d, want 2 (A's miss, B's miss)", calls)
	}
}

// TestMetricsAfterScriptedRun scrapes /metrics after hits, misses, 429s and a
// breaker opening, and checks the counters moved as they should.
func TestMetricsAfterScriptedRun(t *testing.T) {
	busy := &model{status: http.StatusInternalServerError}
	bs := httptest.NewServer(busy)
	defer bs.Close()
	ok := &model{}
	oks := httptest.NewServer(ok)
	defer oks.Close()
	r := start(t, fmt.Sprintf(baseConfig, "0.93"), bs.URL, oks.URL)

	for _, q := range []string{"q1", "q2", "q1", "q1"} {
		if status, _, body := r.chat(t, q); status != 200 {
			t.Fatalf("%s: status %d: %s", q, status, body)
		}
	}
	m := r.get(t, "/metrics")
	for _, want := range []string{
		`breakwater_requests_total{endpoint="/v1/chat/completions",outcome="hit-exact"} 2`,
		`breakwater_requests_total{endpoint="/v1/chat/completions",outcome="miss"} 2`,
		`breakwater_upstream_breaker_state{target="primary/gpt-test"} 2`,
		`breakwater_upstream_attempts_total{outcome="success",target="fallback/gpt-test"} 2`,
		`breakwater_cache_entries{tier="exact"}`,
		`breakwater_index_state{state="ready"} 1`,
		`breakwater_index_state{state="opening"} 0`,
		`breakwater_overhead_seconds_count`,
		`breakwater_embed_duration_seconds_count`,
		`breakwater_coalesced_total 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The 500s: the breaker opened after consecutive_failures = 2 (429s
	// would not open it: they are congestion, not breakage).
	if !strings.Contains(m, `breakwater_upstream_attempts_total{outcome="server_error",target="primary/gpt-test"} 2`) {
		t.Errorf("/metrics: want 2 server errors on the primary:\n%s", grep(m, "attempts_total"))
	}
	if got := busy.calls.Load(); got != 2 {
		t.Errorf("busy upstream calls = %d, want 2 (then the breaker is open)", got)
	}
	// Every metric Breakwater exports is documented in the reference's
	// metric table (the coredns rule), so operators can find what a series
	// means.
	readme, err := os.ReadFile("../../docs/REFERENCE.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(m, "\n") {
		if !strings.HasPrefix(line, "# TYPE breakwater_") {
			continue
		}
		name := strings.Fields(line)[2]
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("metric %s is not listed in docs/REFERENCE.md", name)
		}
	}
	st := r.get(t, "/stats")
	if !strings.Contains(st, `"state":"open"`) {
		t.Errorf("/stats does not show the open breaker: %s", st)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestShutdownFlushesAndRestartHits stops a sidecar (as SIGTERM would) right
// after a miss and checks that a new one on the same data_dir answers the
// question from the persisted index.
func TestShutdownFlushesAndRestartHits(t *testing.T) {
	up := &model{}
	us := httptest.NewServer(up)
	defer us.Close()
	dir := t.TempDir()
	cfg := strings.ReplaceAll(fmt.Sprintf(baseConfig, "0.93")+noSampling, "{{DATA}}", filepath.ToSlash(dir))
	r1 := start(t, cfg, us.URL, us.URL)
	r1.chat(t, "Which planet is the largest?")
	r1.stop()
	r2 := start(t, cfg, us.URL, us.URL)
	_, h, _ := r2.chat(t, "Which planet is the largest?")
	if got := h.Get("X-Breakwater-Cache"); got != "hit-semantic" && got != "hit-exact" {
		t.Errorf("after restart: %q, want a hit", got)
	}
	if got := up.calls.Load(); got != 1 {
		t.Errorf("upstream calls = %d, want 1", got)
	}
}

// TestLongTextsWithSharedPrefixDoNotMatch: the built-in encoder sees only the
// first 128 tokens, so two long questions that differ after them get the same
// vector (similarity 1). A text the encoder truncates gets exact hits only
// (issue 42): it is never indexed, and the exact key covers the whole
// request.
func TestLongTextsWithSharedPrefixDoNotMatch(t *testing.T) {
	up := &model{}
	us := httptest.NewServer(up)
	defer us.Close()
	r := start(t, fmt.Sprintf(baseConfig, "0.93"), us.URL, us.URL)
	prefix := strings.Repeat("The quick brown fox jumps over the lazy dog near the river bank. ", 16)
	a, b := prefix+"So, what is two plus two?", prefix+"So, who wrote Hamlet?"
	r.chat(t, a)
	_, h, body := r.chat(t, b)
	if got := h.Get("X-Breakwater-Cache"); got != "miss" {
		t.Errorf("second long text: %q, want miss (it differs after the first 128 tokens): %s", got, body)
	}
	_, h, _ = r.chat(t, a)
	if got := h.Get("X-Breakwater-Cache"); got != "hit-exact" {
		t.Errorf("repeat of the first long text: %q, want hit-exact", got)
	}
	// Both misses were looked up in the exact tier only; neither answer
	// was queued for the index (Store skips it before queueing).
	st := r.get(t, "/stats")
	if !strings.Contains(st, `"exact_only":2`) || !strings.Contains(st, `"semantic":0`) {
		t.Errorf("/stats does not show two exact-only lookups and an empty index: %s", st)
	}
}

// TestServesWhenIndexCannotOpen: a second sidecar pointed at a vector store
// that another one holds still comes up and answers; the semantic tier stays
// off and /readyz and /stats say why.
func TestServesWhenIndexCannotOpen(t *testing.T) {
	up := &model{}
	us := httptest.NewServer(up)
	defer us.Close()
	cfg := strings.ReplaceAll(fmt.Sprintf(baseConfig, "0.93"), "{{DATA}}", filepath.ToSlash(t.TempDir()))
	start(t, cfg, us.URL, us.URL)
	r := start(t, cfg, us.URL, us.URL)
	if status, h, body := r.chat(t, "Which planet is the largest?"); status != http.StatusOK || h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("request with the store held elsewhere: %d %q: %s", status, h.Get("X-Breakwater-Cache"), body)
	}
	if _, h, _ := r.chat(t, "Which planet is the largest?"); h.Get("X-Breakwater-Cache") != "hit-exact" {
		t.Errorf("repeat = %q, want hit-exact (the exact tier works without the index)", h.Get("X-Breakwater-Cache"))
	}
	if got := r.get(t, "/readyz"); !strings.Contains(got, `"degraded"`) || !strings.Contains(got, "another breakwater") {
		t.Errorf("/readyz = %s, want degraded naming the held store", got)
	}
	if got := r.get(t, "/stats"); !strings.Contains(got, `"index_state":"failed"`) {
		t.Errorf("/stats = %s, want index_state failed", got)
	}
}

// TestIndexReadyLogged: the operator learns from the log when the semantic
// tier is ready and how long its index took to open.
func TestIndexReadyLogged(t *testing.T) {
	dir := t.TempDir()
	toml := strings.ReplaceAll(fmt.Sprintf(baseConfig, "0.93"), "{{DATA}}", filepath.ToSlash(dir))
	toml = strings.ReplaceAll(strings.ReplaceAll(toml, "{{UP1}}", "http://127.0.0.1:1"), "{{UP2}}", "http://127.0.0.1:1")
	path := filepath.Join(dir, "breakwater.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(string) string { return "" }
	cfg, err := config.Load(path, env)
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	a, err := New(t.Context(), cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	select {
	case <-a.IndexOpened():
	case <-time.After(10 * time.Second):
		t.Fatal("the vector index did not open within 10s")
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `msg="semantic tier ready"`) {
			line = l
		}
	}
	if !strings.Contains(line, "took=") {
		t.Errorf("no \"semantic tier ready\" line with the time it took in the log:\n%s", logs.String())
	}
}
