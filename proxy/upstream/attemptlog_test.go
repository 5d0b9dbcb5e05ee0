package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer for concurrent log writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestAttemptLogLines checks the lines an attempt writes (built only when
// one is written) name the request, the attempt and the target: a 503 then
// a 200 logs one "upstream retry" line for attempt 1, and a debug line for
// each attempt with its own number.
func TestAttemptLogLines(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			always(http.StatusServiceUnavailable)(w, r, n)
			return
		}
		ok(w, r, n)
	})
	var buf lockedBuffer
	opts := oneTarget(up.url())
	opts.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newCaller(t, opts)
	resp, err := c.Do(context.Background(), chat("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.Status)
	}
	retries := buf.lines(t, "upstream retry")
	if len(retries) != 1 {
		t.Fatalf("%d retry lines, want 1", len(retries))
	}
	for k, want := range map[string]any{"request_id": "req-42", "attempt": float64(1), "target": "a/*"} {
		if got := retries[0][k]; got != want {
			t.Errorf("retry line %s = %v, want %v", k, got, want)
		}
	}
	attempts := buf.lines(t, "upstream attempt")
	if len(attempts) != 2 {
		t.Fatalf("%d attempt lines, want 2", len(attempts))
	}
	for i, l := range attempts {
		if got, want := l["attempt"], float64(i+1); got != want {
			t.Errorf("attempt line %d: attempt = %v, want %v", i, got, want)
		}
	}
}
