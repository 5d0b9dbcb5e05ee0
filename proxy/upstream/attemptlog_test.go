package upstream

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/breakwater-dev/breakwater/lib/logtest"
)

// TestAttemptLogLines checks the lines an attempt writes (built only when
// one is written) name the request, the attempt and the target: a 503 then
// a 200 logs one "upstream retry" debug line for attempt 1, and a debug line for
// each attempt with its own number.
func TestAttemptLogLines(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			always(http.StatusServiceUnavailable)(w, r, n)
			return
		}
		ok(w, r, n)
	})
	var buf logtest.Buffer
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
	retries := buf.Lines("upstream retry")
	if len(retries) != 1 {
		t.Fatalf("%d retry lines, want 1", len(retries))
	}
	for k, want := range map[string]any{"request_id": "req-42", "attempt": float64(1), "target": "a/*"} {
		if got := retries[0][k]; got != want {
			t.Errorf("retry line %s = %v, want %v", k, got, want)
		}
	}
	attempts := buf.Lines("upstream attempt")
	if len(attempts) != 2 {
		t.Fatalf("%d attempt lines, want 2", len(attempts))
	}
	for i, l := range attempts {
		if got, want := l["attempt"], float64(i+1); got != want {
			t.Errorf("attempt line %d: attempt = %v, want %v", i, got, want)
		}
	}
}
