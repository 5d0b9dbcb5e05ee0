package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"
	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

// APIGemini names the Gemini API in a Storm (generateContent).
const APIGemini = "gemini"

// Storm is a retry storm: a few prompts sent at once, each refused Refusals
// times by the model in its API's own shape, asking for RetryAfter, then
// answered; sent through one sidecar on default settings.
type Storm struct {
	Name string `json:"name"`
	// API is loadgen.APIOpenAI (Chat Completions; 429 + Retry-After),
	// loadgen.APIAnthropic (Messages; 529 overloaded_error + retry-after) or
	// APIGemini (generateContent; 429 RESOURCE_EXHAUSTED with RetryInfo).
	API        string        `json:"api"`
	Prompts    int           `json:"prompts"`
	Refusals   int           `json:"refusals"`
	RetryAfter time.Duration `json:"retry_after"`
	// Latency is the model's time per answer.
	Latency time.Duration `json:"latency"`
	// Within is the target: every prompt answered 200 within it, after
	// exactly Refusals+1 upstream attempts.
	Within time.Duration `json:"within"`
	// ClientTimeout is when a client gives up: long enough to see how late
	// an answer comes, short enough that a failing storm ends soon.
	ClientTimeout time.Duration `json:"client_timeout"`
}

// Storms are issue 39's retry storms, one per API: four prompts at once,
// each refused twice with a one-second wait, then answered. The targets
// (Within, and Refusals+1 attempts) are its "Must show": "four such
// prompts at once, on defaults: all four get 200 within 5 s", "the
// upstream sees exactly 3 attempts".
var Storms = []Storm{
	{Name: "retry storm, OpenAI 429", API: loadgen.APIOpenAI, Prompts: 4, Refusals: 2, RetryAfter: time.Second,
		Latency: 100 * time.Millisecond, Within: 5 * time.Second, ClientTimeout: 15 * time.Second},
	{Name: "retry storm, Anthropic 529", API: loadgen.APIAnthropic, Prompts: 4, Refusals: 2, RetryAfter: time.Second,
		Latency: 100 * time.Millisecond, Within: 5 * time.Second, ClientTimeout: 15 * time.Second},
	{Name: "retry storm, Gemini 429 RetryInfo", API: APIGemini, Prompts: 4, Refusals: 2, RetryAfter: time.Second,
		Latency: 100 * time.Millisecond, Within: 5 * time.Second, ClientTimeout: 15 * time.Second},
}

// StormPrompt is what one prompt of a storm got.
type StormPrompt struct {
	Status   int           `json:"status"` // 0: no answer before the client gave up
	Latency  time.Duration `json:"latency"`
	Attempts int           `json:"attempts"` // calls the model received for it
}

// StormResult is a storm's outcome, prompt by prompt.
type StormResult struct {
	Storm   Storm         `json:"storm"`
	Prompts []StormPrompt `json:"prompts"`
}

// RunStorm sends the storm's prompts at once through a fresh sidecar on
// default settings, in front of a fresh simulated model that refuses each
// prompt's first Refusals calls.
func RunStorm(ctx context.Context, st Storm, logger *slog.Logger, status io.Writer) (*StormResult, error) {
	model := sim.New(sim.Options{Latency: st.Latency, RefuseFirst: st.Refusals, CountPrompts: true, RetryAfter: st.RetryAfter, Seed: 1})
	msrv := httptest.NewServer(model)
	defer msrv.Close()
	// The upstream's root with the version its API's clients call (the
	// sidecar's one upstream serves every API).
	root := msrv.URL + "/v1"
	if st.API == APIGemini {
		root = msrv.URL + "/v1beta"
	}
	url, stop, err := startBreakwater(ctx, Options{Logger: logger}.withLogger(), root)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	statusf(status, "%s: %d prompts at once, each refused %d times (wait %s), through one sidecar (default settings)",
		st.Name, st.Prompts, st.Refusals, st.RetryAfter)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: st.Prompts}}
	defer client.CloseIdleConnections()
	res := &StormResult{Storm: st, Prompts: make([]StormPrompt, st.Prompts)}
	var wg sync.WaitGroup
	for i := range st.Prompts {
		wg.Go(func() {
			res.Prompts[i] = askAPI(ctx, client, url, st.API, stormPrompt(i), st.ClientTimeout)
		})
	}
	wg.Wait()
	// Attempts are read once the sidecar has stopped: one it sent after its
	// client gave up counts too.
	stop()
	stopped = true
	for i := range res.Prompts {
		res.Prompts[i].Attempts = model.Attempts(stormPrompt(i))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// stormPrompt is a storm's prompt i, distinct from the others.
func stormPrompt(i int) string { return fmt.Sprintf("Storm prompt %d: %s", i, prompt(i)) }

// askAPI sends question once to the sidecar at url in the API's wire shape
// and reads the whole answer; the client gives up after timeout.
func askAPI(ctx context.Context, client *http.Client, url, api, question string, timeout time.Duration) StormPrompt {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body any
	path, header := "/v1/chat/completions", http.Header{"Authorization": {"Bearer sk-demo"}}
	switch api {
	case loadgen.APIAnthropic:
		path = "/v1/messages"
		header = http.Header{"X-Api-Key": {"sk-ant-demo"}, "Anthropic-Version": {"2023-06-01"}}
		body = map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 256,
			"messages": []map[string]string{{"role": "user", "content": question}}}
	case APIGemini:
		path = "/v1beta/models/gemini-2.5-flash:generateContent"
		header = http.Header{"X-Goog-Api-Key": {"gm-demo"}}
		body = map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]string{"text": question}}}}}
	default:
		body = map[string]any{"model": "gpt-test", "messages": []map[string]string{{"role": "user", "content": question}}}
	}
	b, _ := json.Marshal(body)
	status, _, latency := post(ctx, client, url+path, b, header)
	return StormPrompt{Status: status, Latency: latency}
}

// stormTarget is one target of a storm.
type stormTarget func(r *StormResult) (figure, target string, ok bool)

// stormTargets are a storm's targets, from issue 39's "Must show" (see
// Storms): every prompt answered 200, the slowest within Storm.Within, and
// the model called exactly Refusals+1 times per prompt (no attempt lost to
// shedding, none sent twice).
var stormTargets = []stormTarget{
	func(r *StormResult) (string, string, bool) {
		ok, other := 0, map[int]int{}
		for _, p := range r.Prompts {
			if p.Status == http.StatusOK {
				ok++
			} else {
				other[p.Status]++
			}
		}
		var rest []string
		for _, status := range slices.Sorted(maps.Keys(other)) {
			what := strconv.Itoa(status)
			if status == 0 {
				what = "no answer in " + r.Storm.ClientTimeout.String()
			}
			rest = append(rest, fmt.Sprintf("%d × %s", other[status], what))
		}
		fig := fmt.Sprintf("answered 200: %d/%d", ok, len(r.Prompts))
		if len(rest) > 0 {
			fig += " (" + strings.Join(rest, ", ") + ")"
		}
		return fig, "all", ok == len(r.Prompts)
	},
	func(r *StormResult) (string, string, bool) {
		var slowest time.Duration
		for _, p := range r.Prompts {
			slowest = max(slowest, p.Latency)
		}
		return "slowest answer " + dur(slowest), "≤ " + r.Storm.Within.String(), slowest <= r.Storm.Within
	},
	func(r *StormResult) (string, string, bool) {
		var n []int
		for _, p := range r.Prompts {
			n = append(n, p.Attempts)
		}
		want := r.Storm.Refusals + 1
		return fmt.Sprintf("upstream attempts per prompt %v", n), fmt.Sprintf("each exactly %d", want),
			!slices.ContainsFunc(n, func(a int) bool { return a != want })
	},
}

// checks evaluates every storm target, under the row name.
func (r *StormResult) checks(row string) []Check {
	out := make([]Check, 0, len(stormTargets))
	for _, t := range stormTargets {
		fig, target, ok := t(r)
		out = append(out, Check{Row: row, Figure: fig, Target: target, Pass: ok})
	}
	return out
}
