package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestEveryResponseSaysCache: every response of a model-API route says
// X-Breakwater-Cache, a 502 (the upstream is down), a 400 (bad JSON) and a
// pass-through that reached no upstream included; a path outside the APIs,
// GET / and /stats claim no cache outcome.
func TestEveryResponseSaysCache(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // connection refused from here on
	r := start(t, fmt.Sprintf(baseConfig, "0.93"), downURL, downURL)

	code, h, body := r.chat(t, "is anyone there?")
	if code != http.StatusBadGateway && code != http.StatusServiceUnavailable {
		t.Fatalf("upstream down: status %d, want 502 or 503: %s", code, body)
	}
	if got := h.Get("X-Breakwater-Cache"); got != "miss" {
		t.Errorf("upstream down (%d): X-Breakwater-Cache = %q, want miss", code, got)
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/chat/completions", `{"model":`, http.StatusBadRequest, "bypass"},
		{"GET", "/v1/files", "", http.StatusBadGateway, "bypass"},
		{"GET", "/nowhere", "", http.StatusNotFound, ""},
		{"GET", "/", "", http.StatusOK, ""},
		{"GET", "/stats", "", http.StatusOK, ""},
	} {
		req, _ := http.NewRequest(tc.method, r.url+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("X-Breakwater-Cache") != tc.want {
			t.Errorf("%s %s: %d with X-Breakwater-Cache %q, want %d with %q: %s", tc.method, tc.path,
				resp.StatusCode, resp.Header.Get("X-Breakwater-Cache"), tc.status, tc.want, b)
		}
		if tc.path == "/" {
			var links map[string]string
			if err := json.Unmarshal(b, &links); err != nil || links["dashboard"] != "/dashboard" || links["stats"] != "/stats" || links["metrics"] != "/metrics" {
				t.Errorf("GET / = %s (%v), want links to /dashboard, /stats and /metrics", b, err)
			}
		}
	}
}

// TestStatsIsCompactAndRounded: after 11 requests (4 of them hits) the
// hit rate reads 0.3636, every rate has at most four decimals, and the
// timeline lists the one minute that had requests, not sixty.
func TestStatsIsCompactAndRounded(t *testing.T) {
	us := httptest.NewServer(&model{})
	defer us.Close()
	r := start(t, fmt.Sprintf(baseConfig, "0.93")+noSampling, us.URL, us.URL)
	// 7 distinct questions (misses), then 4 repeats (exact hits).
	qs := []string{"alpha one", "bravo two", "charlie three", "delta four", "echo five", "foxtrot six", "golf seven",
		"alpha one", "bravo two", "charlie three", "delta four"}
	for _, q := range qs {
		if code, _, body := r.chat(t, q); code != http.StatusOK {
			t.Fatalf("%q: %d %s", q, code, body)
		}
	}
	raw := r.get(t, "/stats")
	var st struct {
		Requests uint64          `json:"requests"`
		HitRate  float64         `json:"hit_rate"`
		Timeline []struct{}      `json:"timeline"`
		Windows  json.RawMessage `json:"windows"`
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	if st.Requests != 11 || st.HitRate != 0.3636 {
		t.Errorf("requests %d, hit_rate %v: want 11 and 0.3636", st.Requests, st.HitRate)
	}
	// The minute may turn between two requests: one or two points.
	if n := len(st.Timeline); n < 1 || n > 2 {
		t.Errorf("timeline has %d points, want the minutes with requests (1 or 2)", n)
	}
	if long := regexp.MustCompile(`"[a-z_]*(rate|ratio)[a-z_]*":(\{[^}]*)?[0-9]\.[0-9]{5,}`).FindString(raw); long != "" {
		t.Errorf("a rate with more than four decimals: %s", long)
	}
	// 5,979 bytes with sixty timeline points, most of them empty; the
	// bound leaves room for the tokens, goodput and lane fields, not for
	// the empty minutes.
	if len(raw) > 4000 {
		t.Errorf("/stats is %d bytes after 11 requests, want under 4000:\n%s", len(raw), raw)
	}
}

// TestLogDurationsInMilliseconds: a duration attribute is logged as
// NAME_ms in milliseconds, not as raw nanoseconds under its bare name.
func TestLogDurationsInMilliseconds(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, "info", "json").Info("upstream retry", "wait", 51069661*time.Nanosecond, "reason", "429")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec["wait"]; ok || rec["wait_ms"] != 51.069 {
		t.Errorf("log record %s: want wait_ms 51.069 and no wait", buf.String())
	}
}
