package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tokenProvider is a loopback model limited by tokens per minute only, in
// one provider's shape: a continuous token bucket per budget, charged each
// request's cost at admission (the test states the cost the caller
// estimates), refusing with the provider's 429 when a budget does not cover
// it, and reporting its budgets in the provider's headers.
type tokenProvider struct {
	shape     string // "openai", "anthropic", "gemini" or "gemini-bare" (no quotaValue)
	perMinute float64
	up        *fakeUpstream

	mu     sync.Mutex
	level  [2]float64 // input (or all tokens, for openai), output
	at     time.Time
	served atomic.Int64
	// refused counts 429s; admitted the tokens admitted.
	refused, admitted atomic.Int64
}

func newTokenProvider(shape string, perMinute, start float64) *tokenProvider {
	return &tokenProvider{shape: shape, perMinute: perMinute, level: [2]float64{start, start}, at: time.Now()}
}

func (p *tokenProvider) handle(w http.ResponseWriter, r *http.Request, n int) {
	var req struct {
		In  int `json:"in"`
		Out int `json:"out"`
	}
	_ = json.Unmarshal([]byte(p.up.calls()[n-1].body), &req)
	cost := [2]float64{float64(req.In + req.Out), float64(req.Out)}
	if p.shape != "openai" {
		cost[0] = float64(req.In)
	}
	p.mu.Lock()
	now := time.Now()
	for i := range p.level {
		p.level[i] = min(p.perMinute, p.level[i]+now.Sub(p.at).Seconds()*p.perMinute/60)
	}
	p.at = now
	fits := p.level[0] >= cost[0] && (p.shape != "anthropic" || p.level[1] >= cost[1])
	if fits {
		p.level[0] -= cost[0]
		if p.shape == "anthropic" {
			p.level[1] -= cost[1]
		}
	}
	left := p.level
	wait := max(cost[0]-p.level[0], 0) / (p.perMinute / 60)
	p.mu.Unlock()
	h := w.Header()
	limit := strconv.Itoa(int(p.perMinute))
	switch p.shape {
	case "openai":
		h.Set("X-Ratelimit-Limit-Tokens", limit)
		h.Set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(max(int(left[0]), 0)))
	case "anthropic":
		h.Set("Anthropic-Ratelimit-Input-Tokens-Limit", limit)
		h.Set("Anthropic-Ratelimit-Input-Tokens-Remaining", strconv.Itoa(max(int(left[0]), 0)/1000*1000)) // rounded, as Anthropic's are
		h.Set("Anthropic-Ratelimit-Output-Tokens-Limit", limit)
		h.Set("Anthropic-Ratelimit-Output-Tokens-Remaining", strconv.Itoa(max(int(left[1]), 0)/1000*1000))
	}
	if !fits {
		p.refused.Add(1)
		if !strings.HasPrefix(p.shape, "gemini") { // Gemini sends no headers: its RetryInfo is in the body
			h.Set("Retry-After-Ms", strconv.Itoa(int(wait*1000)+1))
		}
		switch p.shape {
		case "openai":
			reply(w, 429, fmt.Sprintf(`{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit %s, Used %d, Requested %d. Please try again in %.1fs.","type":"tokens","code":"rate_limit_exceeded"}}`,
				limit, int(p.perMinute-left[0]), int(cost[0]), wait))
		case "anthropic":
			reply(w, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of `+limit+` input tokens per minute."}}`)
		default:
			value := `,"quotaValue":"` + limit + `"`
			if p.shape == "gemini-bare" {
				value = ""
			}
			reply(w, 429, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"Quota exceeded.","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateContentInputTokensPerModelPerMinute"`+value+`}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}]}}`)
		}
		return
	}
	p.admitted.Add(int64(cost[0]))
	time.Sleep(20 * time.Millisecond) // the model's time to answer, not synchronisation
	p.served.Add(1)
	reply(w, 200, fmt.Sprintf(`{"id":"x","usage":{"prompt_tokens":%d,"completion_tokens":%d}}`, req.In, req.Out))
}

// costly is a request of in input and out output tokens, which the test
// provider charges from its body and the caller from its Cost.
func costly(in, out int) *Request {
	r := chat("gpt-4o")
	r.Body = []byte(fmt.Sprintf(`{"model":"gpt-4o","in":%d,"out":%d}`, in, out))
	r.Cost = Cost{Input: in, Output: out}
	r.Usage = func(body []byte) (int, int, bool) {
		var u struct {
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		err := json.Unmarshal(body, &u)
		return u.Usage.Prompt, u.Usage.Completion, err == nil
	}
	return r
}

// TestTokenBudgetsAbsorbAPeak: a model limited by tokens per minute only,
// offered a burst of three times what its bucket holds, 80 % short requests
// and 20 % long ones, in each provider's shape (OpenAI's headers and TPM
// body, Anthropic's input and output headers, Gemini's QuotaFailure with no
// headers at all). The lane paces by the budget it learns: every request is
// answered, long ones too, with few refusals.
func TestTokenBudgetsAbsorbAPeak(t *testing.T) {
	for _, shape := range []string{"openai", "anthropic", "gemini"} {
		t.Run(shape, func(t *testing.T) {
			p := newTokenProvider(shape, 240_000, 3000) // 4000 tokens a second; 3000 in the bucket
			up := startUpstream(t, p.handle)
			p.up = up
			opts := oneTarget(up.url())
			opts.Retry = RetryPolicy{MaxAttempts: 4, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second, Deadline: 30 * time.Second}
			c := newCaller(t, opts)
			var wg sync.WaitGroup
			var short, long atomic.Int32
			const n = 30
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					in, out, answered := 150, 50, &short
					if i%5 == 4 {
						in, out, answered = 1500, 500, &long
					}
					resp, err := c.Do(context.Background(), costly(in, out))
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
					if resp.Status == 200 {
						answered.Add(1)
					}
				}()
			}
			wg.Wait()
			if short.Load() != n*4/5 || long.Load() != n/5 {
				t.Errorf("answered %d of %d short and %d of %d long, want all", short.Load(), n*4/5, long.Load(), n/5)
			}
			// 30 requests of 12 000 tokens against 3000 in the bucket: sent
			// as they come, most are refused at least once.
			if r := p.refused.Load(); r > 2 {
				t.Errorf("the provider refused %d attempts, want at most 2 (the cold burst before the first answer): the lane paces by the token budget it learnt", r)
			}
			ts := statsOf(t, c, "gpt-4o", "a/*")
			if ts.TokenLimit == nil {
				t.Errorf("no token budget learnt: %+v", ts)
			}
			t.Logf("%s: %d refusals; budget %v, left %v; refusals by limit %v", shape, p.refused.Load(), ts.TokenLimit, ts.TokensLeft, ts.Refusals)
		})
	}
}

// TestTokenBudgetLearntWithoutNumbers: a provider that refuses on input
// tokens and says nothing else (no headers, a QuotaFailure without its
// quotaValue) has its limit estimated within seconds, from what it admitted
// between two refusals at least estimateAfter apart, not after a minute of
// sending.
func TestTokenBudgetLearntWithoutNumbers(t *testing.T) {
	const perMinute = 240_000 // 4000 tokens a second
	p := newTokenProvider("gemini-bare", perMinute, 3000)
	up := startUpstream(t, p.handle)
	p.up = up
	opts := oneTarget(up.url())
	opts.Retry = RetryPolicy{MaxAttempts: 8, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second, Deadline: 60 * time.Second}
	c := newCaller(t, opts)
	var wg sync.WaitGroup
	start := time.Now()
	// 100 requests of 42 000 input tokens in all: about 10 s of budget.
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := 150
			if i%5 == 4 {
				in = 1500
			}
			if _, err := c.Do(context.Background(), costly(in, 50)); err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	ts := statsOf(t, c, "gpt-4o", "a/*")
	got := ts.TokenLimit[LimitInputTokens]
	t.Logf("%d refusals in %s; input budget %.0f a minute (the provider's: %d)", p.refused.Load(), took.Round(time.Millisecond), got, perMinute)
	if took < time.Minute && (got < perMinute/2 || got > perMinute*3/2) {
		t.Errorf("input budget learnt within %s = %.0f a minute, want about the provider's %d", took.Round(time.Second), got, perMinute)
	}
}

// TestRequestTooLargeIsNeverRetried: the provider's "Request too large"
// (the request alone exceeds its limit per minute) is handed to the client
// as it is after one upstream call, never retried; the lane keeps the limit
// it stated, and the next such request is answered at once with 413, in no
// upstream call.
func TestRequestTooLargeIsNeverRetried(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Retry-After", "20")
		reply(w, 429, `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 10000, Requested 50000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","code":"rate_limit_exceeded"}}`)
	})
	reg := prometheus.NewRegistry()
	opts := oneTarget(up.url())
	opts.Metrics = NewMetrics(reg)
	c := newCaller(t, opts)
	resp, err := c.Do(t.Context(), costly(45_000, 5000))
	if err != nil {
		t.Fatalf("first request: %v, want the provider's 429 handed back", err)
	}
	if resp.Status != 429 || up.count() != 1 {
		t.Fatalf("status %d after %d upstream calls, want the provider's 429 after 1", resp.Status, up.count())
	}
	start := time.Now()
	_, err = c.Do(t.Context(), costly(45_000, 5000))
	var ue *Error
	if !errors.As(err, &ue) || ue.Status != http.StatusRequestEntityTooLarge || ue.Code != CodeRequestTooLarge {
		t.Fatalf("second request: %v, want 413 request_too_large", err)
	}
	if d := time.Since(start); d > time.Second || up.count() != 1 {
		t.Errorf("answered after %s and %d upstream calls, want within 1s and no new call", d, up.count())
	}
	// A request that fits is not held back by the too-large one's Retry-After.
	ts := statsOf(t, c, "gpt-4o", "a/*")
	if ts.Paced || ts.Refusals[LimitTokens] != 1 || ts.Sheds[ShedTooLarge] != 1 {
		t.Errorf("paced %v, refusals %v, sheds %v; want not paced, one token refusal, one too_large shed", ts.Paced, ts.Refusals, ts.Sheds)
	}
	if got := testutil.ToFloat64(opts.Metrics.Refusals.WithLabelValues("a/*", LimitTokens)); got != 1 {
		t.Errorf("breakwater_upstream_refusals_total{limit=tokens} = %v, want 1", got)
	}
}

// TestRefusalsByLimit: each refusal counts by the limit it hit, in the
// target's stats and in /metrics.
func TestRefusalsByLimit(t *testing.T) {
	bodies := []struct {
		status int
		body   string
	}{
		{429, `{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests"}}`},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 8,000 output tokens per minute."}}`},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
	}
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= len(bodies) {
			w.Header().Set("Retry-After-Ms", "1")
			reply(w, bodies[n-1].status, bodies[n-1].body)
			return
		}
		ok(w, r, n)
	})
	reg := prometheus.NewRegistry()
	opts := oneTarget(up.url())
	opts.Metrics = NewMetrics(reg)
	opts.Retry = RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Deadline: 10 * time.Second}
	c := newCaller(t, opts)
	if _, err := c.Do(t.Context(), chat("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{LimitRequests: 1, LimitOutputTokens: 1, LimitConcurrency: 1}
	got := statsOf(t, c, "gpt-4o", "a/*").Refusals
	for k, v := range want {
		if got[k] != v {
			t.Errorf("refusals = %v, want %v", got, want)
			break
		}
		if m := testutil.ToFloat64(opts.Metrics.Refusals.WithLabelValues("a/*", k)); m != float64(v) {
			t.Errorf("breakwater_upstream_refusals_total{limit=%q} = %v, want %d", k, m, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("refusals = %v, want %v", got, want)
	}
}

// TestTokenBudgetSharedByAFleet: three callers (a fleet's replicas) share
// one provider's token budget, and each reads the same remaining count in
// its headers. Each paces to its share of the budget, measured from how
// the remaining count moved against what it sent itself, so together they
// respect the budget: every request is answered, and once the replicas
// read the budget the provider refuses at most an eighth of the requests
// left. The same fleet with each replica taking the whole budget as its own
// (lane.WholeBudget) runs after it, for the log.
//
// Measured (2026-12-04, 9 runs): 3–7 refusals sharing, 5–16 each taking
// the whole budget. It compared the two before (sharing at most a third of
// the whole budget's, plus 3; 0–4 against 2–23): both lanes gave back the
// output reservations OpenAI keeps, most of what the whole budget's lanes
// overspent, and they no longer do (lane: TestReconcileKeepsWhatTheProviderKeeps);
// and a lane's share is no longer cut, at each reading, to what it spent in
// it, which held one replica of the token peak at a twentieth of the budget
// (lane: TestShareOfAFleetsBudget), but lets a 17 s burst's shares overshoot
// a little more.
func TestTokenBudgetSharedByAFleet(t *testing.T) {
	const left = 80 // the requests after the cold third
	shared := fleetBurst(t, false)
	whole := fleetBurst(t, true)
	t.Logf("refusals once the replicas read the budget: %d sharing it, %d each taking all of it", shared, whole)
	if shared > left/8 {
		t.Errorf("the provider refused %d attempts of a fleet sharing its budget once the replicas read it: want at most %d, an eighth of the %d requests left", shared, left/8, left)
	}
}

// fleetBurst sends three replicas' bursts of short and long requests to
// one token-limited provider and returns the refusals once a third of the
// requests were answered (the cold burst, before any replica read the
// budget, is refused as it may). whole: each replica takes the whole budget
// as its own.
func fleetBurst(t *testing.T, whole bool) int64 {
	t.Helper()
	p := newTokenProvider("openai", 240_000, 3000) // 4000 tokens a second; 3000 in the bucket
	up := startUpstream(t, p.handle)
	p.up = up
	const replicas, n = 3, 40
	var wg sync.WaitGroup
	var answered atomic.Int32
	for range replicas {
		opts := oneTarget(up.url())
		opts.Retry = RetryPolicy{MaxAttempts: 6, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second, Deadline: 60 * time.Second}
		c := newCaller(t, opts)
		if whole {
			tg := c.routes["gpt-4o"].flat[0].t
			tg.laneFor(laneKey(costly(0, 0).Header, tg.up.cfg)).WholeBudget()
		}
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in, out := 150, 50
				if i%5 == 4 {
					in, out = 1500, 500
				}
				resp, err := c.Do(context.Background(), costly(in, out))
				switch {
				case err == nil && resp.Status == 200:
					answered.Add(1)
				case whole: // the baseline may fail a request: it spends the budget three times over
				case err != nil:
					t.Errorf("request %d: %v", i, err)
				default:
					t.Errorf("request %d: status %d", i, resp.Status)
				}
			}()
		}
	}
	waitUntil(t, func() bool { return p.served.Load() >= replicas*n/3 })
	cold := p.refused.Load()
	wg.Wait()
	if a := answered.Load(); a != replicas*n && !whole {
		t.Errorf("answered %d of %d", a, replicas*n)
	}
	return p.refused.Load() - cold
}
