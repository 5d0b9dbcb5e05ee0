package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A config key set to 0 (or an empty list) means "none" even where the
// library option it reaches reads 0 as its default: before issue 40,
// breaker.consecutive_failures = 0 opened the breaker after 5 failures in a
// row and retry.retry_on = [] retried the default statuses.
func TestConfigZeroReachesTheLibrariesAsNone(t *testing.T) {
	const requests = 8
	failing := func(t *testing.T, retryAndBreaker string) (*model, *running) {
		m := &model{status: http.StatusInternalServerError}
		up := httptest.NewServer(m)
		t.Cleanup(up.Close)
		r := start(t, boundsConfig(retryAndBreaker), up.URL)
		for i := range requests {
			if status, _, body := r.chat(t, "a question the model fails"); status != http.StatusInternalServerError {
				t.Fatalf("request %d: %d %s, want the upstream's 500 passed on", i+1, status, body)
			}
		}
		return m, r
	}
	t.Run("retry_on = []", func(t *testing.T) {
		m, _ := failing(t, "[retry]\nmax_attempts = 2\nretry_on = []")
		if got := m.calls.Load(); got != requests {
			t.Errorf("the upstream was called %d times for %d requests, want one call each (a 500 is not retried)", got, requests)
		}
	})
	t.Run("consecutive_failures = 0", func(t *testing.T) {
		_, r := failing(t, "[retry]\nmax_attempts = 1\nretry_on = [500]\n[breaker]\nmin_requests = 100\nconsecutive_failures = 0")
		// An open breaker still lets a lone target's requests through as a
		// last resort, so its state is read from the metrics: 0 is closed.
		states := grep(r.get(t, "/metrics"), "breakwater_upstream_breaker_state{")
		if states == "" {
			t.Fatal("/metrics has no breaker state")
		}
		for line := range strings.Lines(states) {
			if line = strings.TrimSpace(line); !strings.HasSuffix(line, " 0") {
				t.Errorf("after %d failures in a row: %s, want closed (0)", requests, line)
			}
		}
	})
}

// server.max_body_bytes = 0 takes a body over the proxy's default (4 MiB).
func TestConfigZeroBodyLimitIsNone(t *testing.T) {
	r := startBounds(t, "max_body_bytes = 0")
	big := strings.Repeat("x", 5<<20)
	if status, _, body := r.chat(t, big); status != http.StatusOK {
		t.Errorf("a 5 MiB body with max_body_bytes = 0: %d %.200s, want 200", status, body)
	}
}

// cache.verify.min_score = 0 accepts every candidate the reranker scores:
// before issue 40 it reached the judge as its default, 0.5.
func TestConfigZeroMinScoreIsNoMinimum(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", &model{})
	mux.HandleFunc("POST /v1/rerank", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Documents []string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		scores := make([]string, len(req.Documents))
		for i := range scores {
			scores[i] = fmt.Sprintf(`{"index":%d,"relevance_score":0.1}`, i)
		}
		fmt.Fprintf(w, `{"results":[%s]}`, strings.Join(scores, ","))
	})
	up := httptest.NewServer(mux)
	t.Cleanup(up.Close)
	r := start(t, fmt.Sprintf(baseConfig, "0.99")+`
[cache.verify]
judge = "rerank"
model = "test-reranker"
min_score = 0
sample_rate = 0
`, up.URL, up.URL)
	if _, h, _ := r.chat(t, "How do I reset my password?"); h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("first: %q", h.Get("X-Breakwater-Cache"))
	}
	waitFor(t, "the paraphrase scored 0.1 to hit with min_score = 0", func() bool {
		_, h, _ := r.chat(t, "How can I reset my password?")
		return h.Get("X-Breakwater-Cache") == "hit-semantic"
	})
}
