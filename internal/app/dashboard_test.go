package app

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium finds Debian's headless Chromium (installed by .ci/run). Outside
// CI a machine without it skips the browser test; in CI its absence fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found: .ci/run installs Debian's chromium for this test")
	}
	t.Skip("no chromium, chromium-browser or google-chrome on PATH (apt-get install -y chromium); set CI=1 to make its absence a failure instead of a skip")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0",
		"--virtual-time-budget=6000", "--window-size=1280,1100"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// TestDashboardInBrowser loads /dashboard in headless Chromium after traffic
// (hits, a miss, an open breaker) and finds the hit rate and the targets'
// states in the rendered DOM, with no console errors; it saves a screenshot.
func TestDashboardInBrowser(t *testing.T) {
	bin := chromium(t)
	busy := &model{status: 500} // a 429 is congestion and would not open the breaker
	bs := httptest.NewServer(busy)
	defer bs.Close()
	ok := &model{}
	os2 := httptest.NewServer(ok)
	defer os2.Close()
	r := start(t, fmt.Sprintf(baseConfig, "0.93"), bs.URL, os2.URL)
	for _, q := range []string{"a", "b", "a", "a", "b", "c"} {
		r.chat(t, q)
	}
	dom, logs := runChromium(t, bin, "--dump-dom", r.url+"/dashboard")

	// Hits: a, a, b of 6 eligible requests = 50.0 %.
	hit := regexp.MustCompile(`id="hit-rate">([^<]*)<`).FindStringSubmatch(dom)
	if hit == nil || hit[1] != "50.0%" {
		t.Errorf("hit rate in DOM = %v, want 50.0%%\n%s", hit, dom)
	}
	if !regexp.MustCompile(`data-target="primary/gpt-test".*?class="state open"`).MatchString(dom) {
		t.Errorf("DOM does not show the primary target open")
	}
	if !regexp.MustCompile(`data-target="fallback/gpt-test".*?class="state closed"`).MatchString(dom) {
		t.Errorf("DOM does not show the fallback target closed")
	}
	if st := regexp.MustCompile(`id="status">([^<]*)<`).FindStringSubmatch(dom); st == nil || !strings.HasPrefix(st[1], "updated") {
		t.Errorf("dashboard status %v: want it to have fetched /stats", st)
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "CONSOLE") && (strings.Contains(l, "Uncaught") || strings.Contains(l, "Error")) {
			t.Errorf("console error: %s", l)
		}
	}

	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if dir := os.Getenv("BREAKWATER_SCREENSHOT_DIR"); dir != "" {
		shot = filepath.Join(dir, "dashboard.png")
	}
	runChromium(t, bin, "--screenshot="+shot, "--hide-scrollbars", r.url+"/dashboard")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
		t.Errorf("screenshot %dx%d, want at least 800x600", b.Dx(), b.Dy())
	}
}

// TestSavingsPanelInBrowser loads /dashboard in headless Chromium after
// misses and hits with prices configured and finds the tokens and the cost
// saved in the rendered savings panel; the screenshot is docs/savings.png
// when BREAKWATER_SCREENSHOT_DIR points at docs/.
func TestSavingsPanelInBrowser(t *testing.T) {
	bin := chromium(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-up","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"an answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":800,"total_tokens":2000}}`)
	}))
	defer up.Close()
	r := start(t, fmt.Sprintf(baseConfig, "0.93")+`
[prices]
"gpt-test" = { input = 2.5, output = 10.0 }
`, up.URL, up.URL)
	// 3 misses, 5 exact hits: 5 × (1200 in, 800 out) saved.
	for _, q := range []string{"a", "b", "a", "c", "a", "b", "b", "c"} {
		if code, _, body := r.chat(t, q); code != 200 {
			t.Fatalf("%d: %s", code, body)
		}
	}
	dom, logs := runChromium(t, bin, "--dump-dom", r.url+"/dashboard")
	for id, want := range map[string]string{
		"tok-saved":    "10,000",
		"tok-spent":    "6,000",
		"cost-saved":   "$0.0550", // 5 × (1200 × 2.5 + 800 × 10) / 1e6
		"tok-saved-1h": "10,000",
	} {
		m := regexp.MustCompile(`id="` + id + `">([^<]*)<`).FindStringSubmatch(dom)
		if m == nil || m[1] != want {
			t.Errorf("%s in DOM = %v, want %q", id, m, want)
		}
	}
	if !regexp.MustCompile(`data-model="gpt-test"><td>gpt-test</td><td class="num">6,000</td><td class="num">4,000</td>`).MatchString(dom) {
		t.Errorf("the savings table does not show gpt-test's tokens saved:\n%s", dom)
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "CONSOLE") && (strings.Contains(l, "Uncaught") || strings.Contains(l, "Error")) {
			t.Errorf("console error: %s", l)
		}
	}
	shot := filepath.Join(t.TempDir(), "savings.png")
	if dir := os.Getenv("BREAKWATER_SCREENSHOT_DIR"); dir != "" {
		shot = filepath.Join(dir, "savings.png")
	}
	runChromium(t, bin, "--screenshot="+shot, "--hide-scrollbars", r.url+"/dashboard")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
}
