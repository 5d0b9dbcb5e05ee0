package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/breakwater-dev/breakwater/cache"
	bwfleet "github.com/breakwater-dev/breakwater/fleet"
	"github.com/breakwater-dev/breakwater/fleet/redistest"
)

// budgetConfig is a replica whose budgets live in the Redis at {{REDIS}}:
// tenant {{RPM}} may send 60 requests a minute, tenant {{TPM}} 100,000
// tokens a minute. Requests ask with no-cache, no-store (no embedding: six
// replicas on two busy cores) and stale answers are off, so every request
// is a call or a refusal.
const budgetConfig = `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
[cache]
data_dir = "{{DATA}}"
partition_secret_env = "BW_FLEET_SECRET"
stale_if_error = false
[retry]
max_attempts = 1
deadline = "10s"
[fleet]
redis_url = "{{REDIS}}"
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
[[budgets]]
name = "rpm"
tenant = "{{RPM}}"
requests_per_minute = 60
[[budgets]]
name = "tpm"
tenant = "{{TPM}}"
tokens_per_minute = 100000
`

// tokenModel answers chat requests at once, reporting as usage the
// request's bytes ÷ 4 in and 90 % of its max_tokens out (the estimate
// reserves a little more than the answer uses), and counts per tenant
// (Authorization) the calls and the tokens.
type tokenModel struct {
	mu     sync.Mutex
	calls  map[string]int
	tokens map[string]int
}

func (m *tokenModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(raw, &body)
	in, out := len(raw)/4, body.MaxTokens*9/10
	m.mu.Lock()
	m.calls[r.Header.Get("Authorization")]++
	m.tokens[r.Header.Get("Authorization")] += in + out
	m.mu.Unlock()
	q := ""
	if len(body.Messages) > 0 {
		q = body.Messages[len(body.Messages)-1].Content
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-up","object":"chat.completion","created":1700000000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		body.Model, "answer to: "+q, in, out, in+out)
}

func (m *tokenModel) count(tenant string) (calls, tokens int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls["Bearer "+tenant], m.tokens["Bearer "+tenant]
}

// budgetFleet is n replicas sharing one Redis and one tokenModel.
type budgetFleet struct {
	t     *testing.T
	model *tokenModel
	reps  []*running
	next  atomic.Uint64
}

func partitionOf(t *testing.T, tenant string) string {
	t.Helper()
	p, err := cache.NewPartitioner([]byte(fleetSecret), []string{"authorization", "namespace"})
	if err != nil {
		t.Fatal(err)
	}
	return p.Partition(http.Header{"Authorization": {"Bearer " + tenant}})
}

func startBudgetFleet(t *testing.T, redisURL string, n int) *budgetFleet {
	t.Helper()
	m := &tokenModel{calls: map[string]int{}, tokens: map[string]int{}}
	up := httptest.NewServer(m)
	t.Cleanup(up.Close)
	cfg := strings.NewReplacer("{{REDIS}}", redisURL, "{{RPM}}", partitionOf(t, "tenant-rpm"), "{{TPM}}", partitionOf(t, "tenant-tpm")).Replace(budgetConfig)
	f := &budgetFleet{t: t, model: m}
	for range n {
		f.reps = append(f.reps, startEnv(t, fleetEnv(fleetSecret), cfg, up.URL))
	}
	return f
}

// waitShared waits until every replica has Redis and counts the others.
func (f *budgetFleet) waitShared(within time.Duration) time.Duration {
	f.t.Helper()
	return f.waitUntil(within, func(s bwfleet.Stats) bool { return s.RedisUp && s.Replicas == int64(len(f.reps)) })
}

// waitUntil waits until cond holds for every replica's fleet stats, and
// says how long that took.
func (f *budgetFleet) waitUntil(within time.Duration, cond func(bwfleet.Stats) bool) time.Duration {
	f.t.Helper()
	t0 := time.Now()
	for {
		ok := true
		for _, r := range f.reps {
			ok = ok && cond(r.app.fleet.Stats())
		}
		if ok {
			return time.Since(t0)
		}
		if time.Since(t0) > within {
			f.t.Fatalf("replicas did not all share Redis within %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ask sends one chat request of tenant to the next replica.
func (f *budgetFleet) ask(tenant, question string, maxTokens int) (int, http.Header, string, error) {
	r := f.reps[int(f.next.Add(1))%len(f.reps)]
	body := fmt.Sprintf(`{"model":"gpt-test","max_tokens":%d,"messages":[{"role":"user","content":%s}]}`, maxTokens, jsonString(question))
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tenant)
	req.Header.Set("Cache-Control", "no-cache, no-store")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// tally is what one tenant's load saw.
type tally struct {
	ok, refused atomic.Int64
	mu          sync.Mutex
	bad         []string
}

func (tl *tally) badf(format string, args ...any) {
	tl.mu.Lock()
	if len(tl.bad) < 5 {
		tl.bad = append(tl.bad, fmt.Sprintf(format, args...))
	}
	tl.mu.Unlock()
}

// load sends n requests of tenant, workers at a time, spread over the
// replicas; each answer must be the answer or a budget's 429 with its
// headers.
func (f *budgetFleet) load(tenant string, n, workers, maxTokens int, limitHeader string) *tally {
	tl := &tally{}
	var wg sync.WaitGroup
	var i atomic.Int64
	for range workers {
		wg.Go(func() {
			for {
				k := i.Add(1)
				if k > int64(n) {
					return
				}
				q := fmt.Sprintf("%s question %d", tenant, k)
				status, h, body, err := f.ask(tenant, q, maxTokens)
				switch {
				case err != nil:
					tl.badf("%q: %v", q, err)
				case status == http.StatusOK && strings.Contains(body, "answer to: "+q):
					tl.ok.Add(1)
				case status == http.StatusTooManyRequests && h.Get("Retry-After") != "" && h.Get(limitHeader) != "" &&
					strings.Contains(body, `"budget_exceeded"`):
					tl.refused.Add(1)
				default:
					tl.badf("%q: %d %v %.200s", q, status, h, body)
				}
			}
		})
	}
	wg.Wait()
	return tl
}

// TestBudgetsAcrossTheFleet: with 3 and 6 replicas on one Redis, a tenant
// with 60 requests a minute and one with 100,000 tokens a minute are
// admitted within 5 % of their budgets across the whole fleet (not ×N),
// and a tenant without a budget gets every answer meanwhile.
func TestBudgetsAcrossTheFleet(t *testing.T) {
	rs := redistest.Start(t)
	for i, n := range []int{3, 6} {
		t.Run(fmt.Sprintf("%d replicas", n), func(t *testing.T) {
			f := startBudgetFleet(t, fmt.Sprintf("%s/%d", rs.URL(), i), n)
			f.waitShared(10 * time.Second)
			// The other tenant alone, first.
			alone := time.Now()
			for k := range 10 {
				if status, _, _, err := f.ask("tenant-free", fmt.Sprintf("alone %d", k), 50); err != nil || status != http.StatusOK {
					t.Fatalf("tenant without a budget, alone: %d %v", status, err)
				}
			}
			aloneEach := time.Since(alone) / 10
			t0 := time.Now()
			var rpm, tpm *tally
			var wg sync.WaitGroup
			wg.Go(func() { rpm = f.load("tenant-rpm", 200, 2*n, 50, "X-Ratelimit-Limit-Requests") })
			wg.Go(func() { tpm = f.load("tenant-tpm", 400, 2*n, 1000, "X-Ratelimit-Limit-Tokens") })
			t1 := time.Now()
			free := f.load("tenant-free", 60, 2, 50, "-")
			freeEach := time.Since(t1) * 2 / 60 // two workers
			wg.Wait()
			elapsed := time.Since(t0).Minutes()
			// A Redis call past the 50 ms bound (a loaded machine, -race)
			// decides its request by the replica's share: counted, and
			// each admits at most one request beyond the budget.
			var local float64
			for _, r := range f.reps {
				local += float64(r.app.fleet.Stats().Fallbacks)
			}
			for name, tl := range map[string]*tally{"tenant-rpm": rpm, "tenant-tpm": tpm, "tenant-free": free} {
				if len(tl.bad) > 0 {
					t.Errorf("%s: unexpected answers: %s", name, strings.Join(tl.bad, "; "))
				}
			}
			if free.ok.Load() != 60 {
				t.Errorf("tenant without a budget: %d of 60 answered", free.ok.Load())
			}
			// A bucket of a minute's budget, refilled evenly: what the fleet
			// may admit in elapsed is the budget plus the refill.
			calls, _ := f.model.count("tenant-rpm")
			if want := 60 + 60*elapsed; float64(calls) < 0.95*60-local || float64(calls) > 1.05*want+local || int64(calls) != rpm.ok.Load() {
				t.Errorf("tenant-rpm: %d calls upstream (%d answered, %d refused) in %.1fs; want 60 (+%.1f refilled) ± 5%%",
					calls, rpm.ok.Load(), rpm.refused.Load(), elapsed*60, 60*elapsed)
			}
			_, tokens := f.model.count("tenant-tpm")
			if want := 100000 + 100000*elapsed; float64(tokens) < 0.95*100000-1100*local || float64(tokens) > 1.05*want+1100*local {
				t.Errorf("tenant-tpm: %d tokens upstream (%d answered, %d refused) in %.1fs; want 100000 (+%.0f refilled) ± 5%%",
					tokens, tpm.ok.Load(), tpm.refused.Load(), elapsed*60, 100000*elapsed)
			}
			t.Logf("%d replicas, %.1fs: tenant-rpm %d calls (%d refused), tenant-tpm %d tokens in %d calls (%d refused), tenant-free %d of 60 (%v each, %v alone), %v decided locally",
				n, elapsed*60, calls, rpm.refused.Load(), tokens, tpm.ok.Load(), tpm.refused.Load(), free.ok.Load(),
				freeEach.Round(10*time.Microsecond), aloneEach.Round(10*time.Microsecond), local)
			if local > 330 {
				t.Errorf("%v of 660 requests decided locally with Redis up", local)
			}
		})
	}
}

// TestBudgetRefusalInTheSDK: the official SDK sees a budget's refusal as
// the API's own rate-limit error, with the headers it reads.
func TestBudgetRefusalInTheSDK(t *testing.T) {
	rs := redistest.Start(t)
	f := startBudgetFleet(t, rs.URL(), 1)
	f.waitShared(10 * time.Second)
	client := openai.NewClient(option.WithBaseURL(f.reps[0].url+"/v1"), option.WithAPIKey("tenant-rpm"), option.WithMaxRetries(0),
		option.WithHeader("Cache-Control", "no-cache, no-store"))
	var last error
	for k := range 61 {
		_, last = client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
			Model:    "gpt-test",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("sdk %d", k))},
		})
		if last != nil {
			break
		}
	}
	var apiErr *openai.Error
	if !errors.As(last, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "budget_exceeded" {
		t.Fatalf("past the budget: %v; want 429 budget_exceeded", last)
	}
	h := apiErr.Response.Header
	if h.Get("Retry-After") == "" || h.Get("X-Ratelimit-Limit-Requests") != "60" || h.Get("X-Ratelimit-Remaining-Requests") != "0" ||
		!strings.HasPrefix(h.Get("X-Breakwater-Budget"), "rpm") {
		t.Errorf("headers %v", h)
	}
	var st struct {
		Fleet struct {
			Store   string `json:"store"`
			Budgets []struct {
				Name     string `json:"name"`
				Admitted uint64 `json:"admitted"`
				Refused  uint64 `json:"refused"`
			} `json:"budgets"`
		} `json:"fleet"`
	}
	if err := json.Unmarshal([]byte(f.reps[0].get(t, "/stats")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Fleet.Store != "redis" || len(st.Fleet.Budgets) != 2 || st.Fleet.Budgets[0].Refused != 1 || st.Fleet.Budgets[0].Admitted < 60 {
		t.Errorf("/stats fleet = %+v", st.Fleet)
	}
	if m := f.reps[0].get(t, "/metrics"); !strings.Contains(m, `breakwater_budget_refused_total{budget="rpm"} 1`) || !strings.Contains(m, "breakwater_fleet_redis_up 1") {
		t.Errorf("/metrics lacks the budget's counts")
	}
}

// TestRedisOutageUnderLoad: Redis killed for 10 s while three replicas
// serve: no 5xx, the budgets fall back to each replica's share (counted),
// and every replica shares again within 2 s of Redis coming back.
func TestRedisOutageUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped by go test -short (no variable enables it: it runs whenever -short is absent, as in CI); a 10 s Redis outage")
	}
	rs := redistest.Start(t)
	f := startBudgetFleet(t, rs.URL(), 3)
	f.waitShared(10 * time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, bad atomic.Int64
	var samples sync.Map
	for w := range 3 {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				tenant := []string{"tenant-rpm", "tenant-tpm", "tenant-free"}[w]
				status, _, body, err := f.ask(tenant, fmt.Sprintf("%s outage %d", tenant, k), 50)
				sent.Add(1)
				if err != nil || status >= 500 || (status != http.StatusOK && status != http.StatusTooManyRequests) {
					bad.Add(1)
					samples.Store(k, fmt.Sprintf("%d %v %.200s", status, err, body))
				}
				time.Sleep(20 * time.Millisecond) // the load's pace, not a synchronisation
			}
		})
	}
	rs.Kill()
	down := time.Now()
	for _, r := range f.reps {
		for r.app.fleet.Stats().RedisUp {
			if time.Since(down) > 5*time.Second {
				t.Fatal("a replica still thinks Redis is up 5s after it was killed")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// 10 s without Redis, under load.
	time.Sleep(10*time.Second - time.Since(down)) // the outage's length, not a synchronisation
	rs.Restart(t)
	// Sharing is back when every replica decides in Redis again; the count
	// of replicas follows within a heartbeat (Redis restarted empty).
	back := f.waitUntil(10*time.Second, func(s bwfleet.Stats) bool { return s.RedisUp })
	f.waitShared(10 * time.Second)
	close(stop)
	wg.Wait()
	if bad.Load() > 0 {
		samples.Range(func(k, v any) bool { t.Errorf("request %v: %v", k, v); return true })
		t.Errorf("%d of %d requests failed during the outage", bad.Load(), sent.Load())
	}
	var fallbacks uint64
	for _, r := range f.reps {
		s := r.app.fleet.Stats()
		fallbacks += s.Fallbacks
		if s.Faults == 0 {
			t.Errorf("stats %+v: no fault counted", s)
		}
	}
	if fallbacks == 0 {
		t.Error("no request was decided by a replica's share during the outage")
	}
	if back > 2*time.Second {
		t.Errorf("sharing resumed %v after Redis came back; want within 2s", back)
	}
	t.Logf("%d requests, %d decided locally, shared again %v after the restart", sent.Load(), fallbacks, back)
}

// TestSlowRedisNeverDelaysRequests: with 200 ms added to every Redis
// exchange (a TCP proxy), no request waits for it: each is decided by the
// replica's share once its check passes the bound (50 ms).
func TestSlowRedisNeverDelaysRequests(t *testing.T) {
	rs := redistest.Start(t)
	d := redistest.NewDelay(t, rs.Addr)
	f := startBudgetFleet(t, "redis://"+d.Addr, 2)
	f.waitShared(10 * time.Second)
	d.Set(200 * time.Millisecond)
	var times []time.Duration
	for k := range 30 {
		t0 := time.Now()
		status, _, _, err := f.ask("tenant-rpm", fmt.Sprintf("slow %d", k), 50)
		times = append(times, time.Since(t0))
		if err != nil || (status != http.StatusOK && status != http.StatusTooManyRequests) {
			t.Fatalf("request %d: %d %v", k, status, err)
		}
	}
	slices.Sort(times)
	if worst := times[len(times)-1]; worst >= 200*time.Millisecond {
		t.Errorf("a request took %v behind a 200ms Redis (p50 %v); the bound is 50ms", worst, times[len(times)/2])
	}
	var fallbacks uint64
	for _, r := range f.reps {
		fallbacks += r.app.fleet.Stats().Fallbacks
	}
	if fallbacks == 0 {
		t.Error("no fallback counted")
	}
}

// TestBudgetsPanelInBrowser loads /dashboard in headless Chromium after a
// tenant went past its budget and finds the budgets panel: where they are
// kept, and each budget's admitted and refused requests.
func TestBudgetsPanelInBrowser(t *testing.T) {
	bin := chromium(t)
	rs := redistest.Start(t)
	f := startBudgetFleet(t, rs.URL(), 1)
	f.waitShared(10 * time.Second)
	tl := f.load("tenant-rpm", 62, 1, 50, "X-Ratelimit-Limit-Requests")
	if tl.ok.Load() != 60 || tl.refused.Load() != 2 {
		t.Fatalf("62 requests of a 60-a-minute tenant: %d answered, %d refused (%v)", tl.ok.Load(), tl.refused.Load(), tl.bad)
	}
	dom, _ := runChromium(t, bin, "--window-size=1280,1400", "--dump-dom", f.reps[0].url+"/dashboard")
	if !strings.Contains(dom, `<section id="budgets">`) {
		t.Errorf("the budgets panel is hidden")
	}
	if m := regexp.MustCompile(`id="budget-store">([^<]*)<`).FindStringSubmatch(dom); m == nil || m[1] != "in Redis, for the fleet" {
		t.Errorf("budgets kept: %v", m)
	}
	if !regexp.MustCompile(`<tr><td>rpm</td><td class="num">60</td><td class="num">2</td></tr>`).MatchString(dom) {
		t.Errorf("no row for budget rpm with 60 admitted and 2 refused:\n%.3000s", dom[strings.Index(dom, `id="budgets"`):])
	}
	pageErrors(t, dom)
}
