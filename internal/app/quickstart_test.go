package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

// TestREADMEQuickStart runs the README's "See it work" as written: the
// built-in simulator (its default latency and capacity), the sidecar on
// BREAKWATER_UPSTREAM_URL alone, and the three curl requests with the
// README's own bodies, which must answer with the X-Breakwater-Cache values
// the README prints. The bodies and the values are read from README.md, so
// an edit there is tested here.
func TestREADMEQuickStart(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "## 3. See it work")
	if start < 0 {
		t.Fatal(`README.md has no "## 3. See it work" section`)
	}
	section := readme[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, cmd := range []string{"./breakwater sim &", "BREAKWATER_UPSTREAM_URL=http://127.0.0.1:9000/v1 ./breakwater &"} {
		if !strings.Contains(section, cmd) {
			t.Errorf("the section no longer runs %q: update this test with it", cmd)
		}
	}
	var bodies []string
	for _, m := range regexp.MustCompile(`curl -si http://127\.0\.0\.1:8080(/v1/chat/completions)[^\n]*\\\n\s*-d '([^']*)'`).FindAllStringSubmatch(section, -1) {
		bodies = append(bodies, m[2])
	}
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^\s+X-Breakwater-Cache: (\S+)$`).FindAllStringSubmatch(section, -1) {
		want = append(want, m[1])
	}
	if len(bodies) != 3 || strings.Join(want, ",") != "miss,hit-exact,hit-semantic" {
		t.Fatalf("README: %d curl bodies and headers %q, want 3 and miss, hit-exact, hit-semantic", len(bodies), want)
	}

	// ./breakwater sim & (its flag defaults)
	model := httptest.NewServer(sim.New(sim.Options{Latency: 300 * time.Millisecond, Jitter: 100 * time.Millisecond, Capacity: 8, RetryAfter: time.Second, Seed: 1}))
	defer model.Close()
	// BREAKWATER_UPSTREAM_URL=http://127.0.0.1:9000/v1 ./breakwater &
	// (the data folder in a temporary one rather than ./data, and without
	// the 1-in-50 sampling the README mentions, which would make this test
	// fail one run in fifty).
	env := map[string]string{
		config.UpstreamURLEnv:                 model.URL + "/v1",
		"BREAKWATER_CACHE_DATA_DIR":           t.TempDir(),
		"BREAKWATER_CACHE_VERIFY_SAMPLE_RATE": "0",
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Load("", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckEnvironment(getenv); err != nil {
		t.Fatal(err)
	}
	a, err := New(t.Context(), cfg, Options{Logger: slog.New(slog.DiscardHandler), Env: getenv})
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
	<-a.IndexOpened()

	for i, body := range bodies {
		if i == 2 {
			// A person types the third command after the first answer was
			// indexed (the write-back is asynchronous).
			waitFor(t, "the first answer to be indexed", func() bool {
				return strings.Contains(r.get(t, "/stats"), `"semantic":1`)
			})
		}
		req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Breakwater-Cache") != want[i] {
			t.Errorf("curl %d: %d, X-Breakwater-Cache %q, want 200 and %q", i+1, resp.StatusCode, resp.Header.Get("X-Breakwater-Cache"), want[i])
		}
	}
	if page := r.get(t, "/dashboard"); !strings.Contains(page, "<title>Breakwater</title>") {
		t.Errorf("/dashboard is not the dashboard page")
	}
}
