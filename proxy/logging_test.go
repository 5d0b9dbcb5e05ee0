package proxy

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/lib/logtest"
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
