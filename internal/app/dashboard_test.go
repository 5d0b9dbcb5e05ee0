package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy"
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
		"--virtual-time-budget=6000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// pageErrors fails t with the errors the dashboard recorded while it ran
// (uncaught errors, rejected promises, console.error: the page keeps them
// in #page-errors), and when the DOM has no such record at all.
func pageErrors(t *testing.T, dom string) {
	t.Helper()
	m := regexp.MustCompile(`(?s)<pre id="page-errors" hidden="">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Errorf("the rendered page has no #page-errors record:\n%.2000s", dom)
		return
	}
	if m[1] != "" {
		t.Errorf("the dashboard threw or logged errors:\n%s", html.UnescapeString(m[1]))
	}
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
	dom, _ := runChromium(t, bin, "--window-size=1280,1100", "--dump-dom", r.url+"/dashboard")

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
	pageErrors(t, dom)

	shot := filepath.Join(t.TempDir(), "dashboard.png")
	runChromium(t, bin, "--window-size=1280,1100", "--screenshot="+shot, "--hide-scrollbars", r.url+"/dashboard")
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
	// Exact hits only: this upstream answers no judge prompt.
	r := start(t, fmt.Sprintf(baseConfig, "0.93")+`
[cache.verify]
judge = "none"
[prices]
"gpt-test" = { input = 2.5, output = 10.0 }
`, up.URL, up.URL)
	// 3 misses, 5 exact hits: 5 × (1200 in, 800 out) saved.
	for _, q := range []string{"a", "b", "a", "c", "a", "b", "b", "c"} {
		if code, _, body := r.chat(t, q); code != 200 {
			t.Fatalf("%d: %s", code, body)
		}
	}
	dom, _ := runChromium(t, bin, "--dump-dom", r.url+"/dashboard")
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
	pageErrors(t, dom)
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

// held is an upstream that answers at once until hold is set, then keeps
// every request until release is closed (or the client gives up): it fills
// a target's slots and queue on demand.
type held struct {
	model
	hold    atomic.Bool
	release chan struct{}
}

func (h *held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.hold.Load() {
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	}
	h.model.ServeHTTP(w, r)
}

const targetsConfig = `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
[cache]
data_dir = "{{DATA}}"
[retry]
max_attempts = 1
deadline = "30s"
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
max_concurrency = 2
max_queue = 3
[[models]]
name = "gpt-test"
targets = [{upstream = "primary"}]
`

// TestDashboardTargetsTable fills a target's slots and queue and sheds past
// it, freezes that /stats body, and renders the real dashboard page against
// it in headless Chromium: every header of "Models and targets" must hold the
// /stats value it names, row by row, with no row for an idle default/*
// target. With BREAKWATER_SCREENSHOT_DIR set it writes dashboard.png there
// (1400 px wide; docs/dashboard.png is made this way).
func TestDashboardTargetsTable(t *testing.T) {
	bin := chromium(t)
	up := &held{release: make(chan struct{})}
	us := httptest.NewServer(up)
	defer us.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(up.release) // held requests return, then wg.Wait, then us.Close
	r := start(t, targetsConfig, us.URL)
	for _, q := range []string{"warm one", "warm two", "warm three", "warm one", "warm two"} {
		if code, _, body := r.chat(t, q); code != http.StatusOK {
			t.Fatalf("warm-up %q: %d %s", q, code, body)
		}
	}

	up.hold.Store(true)
	const n = 9
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.chat(t, fmt.Sprintf("held question %d", i))
		}()
	}
	var frozen []byte
	var stats proxy.Stats
	waitFor(t, "a target with requests in flight, queued and shed", func() bool {
		frozen = []byte(r.get(t, "/stats"))
		stats = proxy.Stats{}
		if err := json.Unmarshal(frozen, &stats); err != nil {
			t.Fatalf("/stats: %v", err)
		}
		for _, m := range stats.Models {
			for _, tg := range m.Targets {
				if tg.Limit > 0 && tg.Queued > 0 && tg.Shed > 0 && tg.Inflight > 0 && tg.Sent > 0 && tg.ServiceRate > 0 {
					return true
				}
			}
		}
		return false
	})

	fs := frozenStats(t, r, frozen)
	dom, _ := runChromium(t, bin, "--window-size=1400,1500", "--dump-dom", fs.URL+"/dashboard")
	pageErrors(t, dom)
	// What each header must show, computed from /stats the way a reader
	// would check it (numbers as en-US with grouping, rates as percentages).
	want := map[string]func(m proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string{
		"Model":  func(m proxy.ModelStatsJSON, _ proxy.TargetStatsJSON) string { return m.Name },
		"Target": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return tg.Name },
		"State":  func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return tg.State },
		"Weight": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string {
			return jsNum(tg.Weight, 2) + " / " + jsNum(tg.Configured, 2)
		},
		"Success": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsPct(tg.SuccessRate) },
		"429 rate": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string {
			return jsPct(float64(tg.RateLimited+tg.Overloaded) / float64(tg.Sent))
		},
		"p50 ms": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsNum(tg.LatencyMS.P50, 0) },
		"p99 ms": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsNum(tg.LatencyMS.P99, 0) },
		"In flight": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string {
			return jsNum(float64(tg.Inflight), 0)
		},
		"Limit":         func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsNum(tg.Limit, 1) },
		"Answers/s":     func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsNum(tg.ServiceRate, 1) },
		"Queued":        func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsNum(float64(tg.Queued), 0) },
		"Queue wait ms": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsNum(tg.QueueWaitMS, 1) },
		"Sent":          func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsNum(float64(tg.Sent), 0) },
		"Pace/s": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string {
			if tg.PacePerS > 0 {
				return jsNum(tg.PacePerS, 2)
			}
			return "–"
		},
		"Retries": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string {
			s := jsNum(float64(tg.RetryBudget.Sent), 0)
			if tg.RetryBudget.Waited > 0 {
				s += " (" + jsNum(float64(tg.RetryBudget.Waited), 0) + " over budget)"
			}
			return s
		},
		"For nobody": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return jsNum(float64(tg.Abandoned), 0) },
		"Refusals": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string {
			by := make([]string, 0, len(tg.Refusals))
			for k, v := range tg.Refusals {
				by = append(by, k+" "+jsNum(float64(v), 0))
			}
			sort.Strings(by)
			s := jsNum(float64(tg.RateLimited+tg.Overloaded), 0)
			if len(by) > 0 {
				s += " (" + strings.Join(by, ", ") + ")"
			}
			return s
		},
		"Refusals/s": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string { return refusalsPerS(tg) },
		"Sheds": func(_ proxy.ModelStatsJSON, tg proxy.TargetStatsJSON) string {
			why := make([]string, 0, len(tg.Sheds))
			for k, v := range tg.Sheds {
				why = append(why, k+" "+jsNum(float64(v), 0))
			}
			sort.Strings(why)
			s := jsNum(float64(tg.Shed), 0)
			if len(why) > 0 {
				s += " (" + strings.Join(why, ", ") + ")"
			}
			return s
		},
	}

	head := regexp.MustCompile(`(?s)<tr id="targets-head">(.*?)</tr>`).FindStringSubmatch(dom)
	if head == nil {
		t.Fatalf("no header row in the targets table:\n%s", dom)
	}
	headers := cellTexts(head[1], "th")
	if len(headers) != len(want) {
		t.Errorf("headers %q: want the %d this test knows (a new column needs its check here)", headers, len(want))
	}
	rows := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?s)<tr data-target="([^"]*)">(.*?)</tr>`).FindAllStringSubmatch(dom, -1) {
		rows[html.UnescapeString(m[1])] = cellTexts(m[2], "td")
	}
	checked, busy := 0, false
	for _, m := range stats.Models {
		for _, tg := range m.Targets {
			cells, ok := rows[tg.Name]
			idle := tg.Sent == 0 && tg.Inflight == 0 && tg.Queued == 0 && tg.Shed == 0
			if strings.HasSuffix(tg.Name, "/*") && idle {
				if ok {
					t.Errorf("row for the idle common target %s: want it left out", tg.Name)
				}
				continue
			}
			if !ok {
				t.Errorf("no row for target %s", tg.Name)
				continue
			}
			delete(rows, tg.Name)
			if len(cells) != len(headers) {
				t.Errorf("%s: %d cells under %d headers: %q", tg.Name, len(cells), len(headers), cells)
				continue
			}
			for i, h := range headers {
				f, ok := want[h]
				if !ok {
					t.Errorf("header %q: this test does not know what it shows", h)
					continue
				}
				if got, w := cells[i], f(m, tg); got != w {
					t.Errorf("%s, column %q = %q, want %q (from /stats)", tg.Name, h, got, w)
				}
				checked++
			}
			busy = busy || (tg.Limit > 0 && tg.Queued > 0 && tg.Shed > 0)
		}
	}
	for name := range rows {
		t.Errorf("row %s is not a target of /stats", name)
	}
	if !busy || checked == 0 {
		t.Errorf("checked %d cells, busy target among them: %v", checked, busy)
	}

	if dir := os.Getenv("BREAKWATER_SCREENSHOT_DIR"); dir != "" {
		shot := filepath.Join(dir, "dashboard.png")
		runChromium(t, bin, "--window-size=1400,2100", "--screenshot="+shot, "--hide-scrollbars", fs.URL+"/dashboard")
		f, err := os.Open(shot)
		if err != nil {
			t.Fatalf("no screenshot: %v", err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("screenshot is not a PNG: %v", err)
		}
		if b := img.Bounds(); b.Dx() != 1400 {
			t.Errorf("screenshot %d px wide, want 1400", b.Dx())
		}
	}
}

// frozenStats serves r's dashboard page with frozen as its /stats: the
// page renders the figures of one moment, whatever the time its browser
// takes to start.
func frozenStats(t *testing.T, r *running, frozen []byte) *httptest.Server {
	t.Helper()
	page := r.get(t, "/dashboard")
	mux := http.NewServeMux()
	mux.HandleFunc("/dashboard", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(frozen)
	})
	fs := httptest.NewServer(mux)
	t.Cleanup(fs.Close)
	return fs
}

// refusalsPerS is what the "Refusals/s" column shows of tg: each limit's
// rate with two decimals, limits in order, "–" with none.
func refusalsPerS(tg proxy.TargetStatsJSON) string {
	by := make([]string, 0, len(tg.RefusalsPerS))
	for k, v := range tg.RefusalsPerS {
		by = append(by, k+" "+jsNum(v, 2))
	}
	if len(by) == 0 {
		return "–"
	}
	sort.Strings(by)
	return strings.Join(by, ", ")
}

const refusalsConfig = `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
[cache]
data_dir = "{{DATA}}"
[retry]
max_attempts = 1
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
[[models]]
name = "gpt-test"
targets = [{upstream = "primary"}]
`

// TestDashboardRefusalsPerSecond: a model that refuses on tokens per
// minute and on requests per minute, in OpenAI's words, shows both rates
// in the targets table's "Refusals/s", each under its limit. /stats is
// frozen once both rates are above zero, and the page renders it.
func TestDashboardRefusalsPerSecond(t *testing.T) {
	bin := chromium(t)
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		// OpenAI's 429s (https://platform.openai.com/docs/guides/rate-limits);
		// no "try again in", so no hold keeps the next request back.
		on, limit := "tokens per min (TPM): Limit 1000000, Used 1000000, Requested 300", "tokens"
		if calls.Add(1)%2 == 0 {
			on, limit = "requests per min (RPM): Limit 500, Used 500, Requested 1", "requests"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for gpt-test in organization org-x on %s.","type":%q,"code":"rate_limit_exceeded"}}`, on, limit)
	}))
	defer up.Close()
	r := start(t, refusalsConfig, up.URL)
	var frozen []byte
	var tg proxy.TargetStatsJSON
	n := 0
	waitFor(t, "refusals per second on tokens and on requests in /stats", func() bool {
		n++
		if code, _, body := r.chat(t, fmt.Sprintf("question %d", n)); code != http.StatusTooManyRequests {
			t.Fatalf("request %d: %d %s, want the model's 429", n, code, body)
		}
		frozen = []byte(r.get(t, "/stats"))
		var stats proxy.Stats
		if err := json.Unmarshal(frozen, &stats); err != nil {
			t.Fatalf("/stats: %v", err)
		}
		for _, m := range stats.Models {
			for _, tg = range m.Targets {
				if tg.Name == "primary/gpt-test" {
					return tg.RefusalsPerS["tokens"] > 0 && tg.RefusalsPerS["requests"] > 0
				}
			}
		}
		return false
	})
	if tg.Refusals["tokens"] == 0 || tg.Refusals["requests"] == 0 {
		t.Errorf("refusals %v: want both limits counted", tg.Refusals)
	}
	fs := frozenStats(t, r, frozen)
	dom, _ := runChromium(t, bin, "--window-size=1400,900", "--dump-dom", fs.URL+"/dashboard")
	pageErrors(t, dom)
	row := regexp.MustCompile(`(?s)<tr data-target="primary/gpt-test">(.*?)</tr>`).FindStringSubmatch(dom)
	if row == nil {
		t.Fatalf("no row for primary/gpt-test:\n%s", dom)
	}
	cell := regexp.MustCompile(`<td data-col="refusals_per_s" class="num">([^<]*)</td>`).FindStringSubmatch(row[1])
	if cell == nil {
		t.Fatalf("no Refusals/s cell in the row:\n%s", row[1])
	}
	// Each limit's figure under its own name, as /stats has it.
	m := regexp.MustCompile(`^requests (\d+\.\d\d), tokens (\d+\.\d\d)$`).FindStringSubmatch(cell[1])
	if m == nil || m[1] == "0.00" || m[2] == "0.00" || cell[1] != refusalsPerS(tg) {
		t.Errorf("Refusals/s = %q, want requests and tokens above zero, as in /stats: %q", cell[1], refusalsPerS(tg))
	}
}

// cellTexts returns the text of each <tag> cell in a serialized row.
func cellTexts(row, tag string) []string {
	var out []string
	tags := regexp.MustCompile(`<[^>]*>`)
	for _, m := range regexp.MustCompile(`(?s)<`+tag+`\b[^>]*>(.*?)</`+tag+`>`).FindAllStringSubmatch(row, -1) {
		out = append(out, html.UnescapeString(tags.ReplaceAllString(m[1], "")))
	}
	return out
}

// jsNum is JavaScript's x.toLocaleString("en", {minimum and maximum
// fraction digits d}): rounded half away from zero, thousands grouped.
func jsNum(x float64, d int) string {
	p := math.Pow(10, float64(d))
	s := strconv.FormatFloat(math.Round(x*p)/p, 'f', d, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	if neg && strings.Trim(b.String(), "0.,") != "" {
		return "-" + b.String()
	}
	return b.String()
}

// jsPct is the dashboard's pct: (x * 100).toFixed(1) + "%".
func jsPct(x float64) string {
	return strconv.FormatFloat(math.Round(x*1000)/10, 'f', 1, 64) + "%"
}

// TestDashboardEmpty: before any request every panel is one line saying
// what will fill it, not an empty chart or table.
func TestDashboardEmpty(t *testing.T) {
	bin := chromium(t)
	us := httptest.NewServer(&model{})
	defer us.Close()
	r := start(t, fmt.Sprintf(baseConfig, "0.93"), us.URL, us.URL)
	dom, _ := runChromium(t, bin, "--window-size=1400,900", "--dump-dom", r.url+"/dashboard")
	pageErrors(t, dom)
	if st := regexp.MustCompile(`id="status">([^<]*)<`).FindStringSubmatch(dom); st == nil || !strings.HasPrefix(st[1], "updated") {
		t.Fatalf("dashboard status %v: want it to have fetched /stats", st)
	}
	for _, id := range []string{"chart-empty", "verify-empty", "split-empty", "hours-empty"} {
		m := regexp.MustCompile(`<p class="empty" id="` + id + `"( hidden="")?>([^<]*)<`).FindStringSubmatch(dom)
		if m == nil || m[1] != "" || len(m[2]) < 20 {
			t.Errorf("panel line %s: %q, want it shown with a sentence", id, m)
		}
	}
	for _, id := range []string{"chart", "fhr-chart", "split", "hours"} {
		if !regexp.MustCompile(`id="` + id + `"[^>]* hidden=""`).MatchString(dom) {
			t.Errorf("#%s is shown empty; want it hidden until there is data", id)
		}
	}
	if !strings.Contains(dom, "no targets yet") {
		t.Errorf("the targets table does not say it is empty")
	}
}
