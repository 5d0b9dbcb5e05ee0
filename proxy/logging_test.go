package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/breakwater-dev/breakwater/lib/logtest"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// TestRequestLogLine checks the one info line per request: it carries the
// request ID, outcome, target, attempts and durations, and never the prompt
// or the Authorization header.
func TestRequestLogLine(t *testing.T) {
	var buf logtest.Buffer
	e := newEnv(t, envOptions{proxy: func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	const secret, prompt = "sk-very-secret-key", "my private medical question"
	r := e.post("/v1/chat/completions", chat(prompt), "Authorization", "Bearer "+secret, HeaderRequestID, "req-123")
	if got, want := r.header.Get(HeaderRequestID), "req-123"; got != want {
		t.Errorf("X-Request-ID echoed %q, want %q", got, want)
	}
	logs := buf.String()
	if strings.Contains(logs, secret) || strings.Contains(logs, prompt) {
		t.Fatalf("an info log line holds the key or the prompt:\n%s", logs)
	}
	var line map[string]any
	if ls := buf.Lines("request"); len(ls) > 0 {
		line = ls[len(ls)-1]
	}
	if line == nil {
		t.Fatalf("no request line in:\n%s", logs)
	}
	for k, want := range map[string]any{"request_id": "req-123", "outcome": "miss", "target": "fake/gpt-test", "attempts": float64(1)} {
		if got := line[k]; got != want {
			t.Errorf("log %s = %v, want %v", k, got, want)
		}
	}
	for _, k := range []string{"duration_us", "upstream_us", "status"} {
		if _, ok := line[k]; !ok {
			t.Errorf("log line lacks %s: %v", k, line)
		}
	}
}

// TestRequestLogLineExactHit checks an exact hit's line: outcome hit_exact
// and similarity the number 1, as a semantic hit's is a number.
func TestRequestLogLineExactHit(t *testing.T) {
	var buf logtest.Buffer
	e := newEnv(t, envOptions{proxy: func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	body := chat("what is the capital of France?")
	e.post("/v1/chat/completions", body, HeaderRequestID, "req-1")
	e.post("/v1/chat/completions", body, HeaderRequestID, "req-2")
	var line map[string]any
	for _, m := range buf.Lines("request") {
		if m["request_id"] == "req-2" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no line for the second request in:\n%s", buf.String())
	}
	if got, want := line["outcome"], OutcomeHitExact; got != want {
		t.Errorf("outcome = %v, want %v", got, want)
	}
	if got, want := line["similarity"], float64(1); got != want {
		t.Errorf("similarity = %#v, want the number 1", got)
	}
}

// TestRequestLogLineMergesAttempts: a request the model refuses on tokens,
// then on requests, then answers, is one info line: attempts 3, and the
// attempts merged in "tried" with the limit each refusal hit. The caller's
// own lines of each attempt and retry are debug lines.
func TestRequestLogLineMergesAttempts(t *testing.T) {
	var calls atomic.Int64
	model := &fakeModel{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// OpenAI's 429s (https://platform.openai.com/docs/guides/rate-limits).
		on := ""
		switch calls.Add(1) {
		case 1:
			on = "tokens per min (TPM): Limit 30000, Used 30000, Requested 300"
		case 2:
			on = "requests per min (RPM): Limit 500, Used 500, Requested 1"
		default:
			model.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for gpt-test in organization org-x on %s.","type":"rate_limit_exceeded","code":"rate_limit_exceeded"}}`, on)
	}))
	t.Cleanup(up.Close)
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e := newEnv(t, envOptions{
		proxy: func(o *Options) { o.Logger = log },
		caller: func(o *upstream.Options) {
			o.Upstreams[0].BaseURL = up.URL + "/v1"
			o.Retry.MaxAttempts = 3
			o.Logger = log
		},
	})
	if r := e.post("/v1/chat/completions", chat("a question refused twice"), HeaderRequestID, "req-3"); r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var lines []map[string]any
	for _, l := range buf.Lines("") {
		if l["request_id"] == "req-3" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || lines[0]["msg"] != "request" {
		t.Fatalf("%d info lines of the request, want one:\n%s", len(lines), buf.String())
	}
	l := lines[0]
	for k, want := range map[string]any{"request_id": "req-3", "status": float64(200), "target": "fake/gpt-test", "attempts": float64(3)} {
		if got := l[k]; got != want {
			t.Errorf("log %s = %v, want %v", k, got, want)
		}
	}
	tried, _ := l["tried"].(string)
	t.Logf("tried = %q", tried)
	if !regexp.MustCompile(`^fake/gpt-test 429 tokens, waited \S+; fake/gpt-test 429 requests, waited \S+; fake/gpt-test 200$`).MatchString(tried) {
		t.Errorf("tried = %q, want the three attempts in order, each refusal with its limit and the wait until the next attempt", tried)
	}
}
