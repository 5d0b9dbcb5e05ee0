package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/fleet/redistest"
	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

// Scenario is a peak: a simulated model whose capacity may change mid-run,
// and an open-loop load of distinct prompts (the cache cannot help), sent on
// the same schedule straight to the model and through Breakwater on its
// default caller settings.
type Scenario struct {
	Name string `json:"name"`
	// Capacity is the model's calls in flight at most; Steps change it.
	Capacity int        `json:"capacity"`
	Steps    []sim.Step `json:"steps,omitempty"`
	// Latency is the model's time per answer, plus a uniform draw in
	// [0, 2·Jitter].
	Latency time.Duration `json:"latency"`
	Jitter  time.Duration `json:"jitter"`
	// Rate is the load in requests per second for Duration.
	Rate     float64       `json:"rate"`
	Duration time.Duration `json:"duration"`
	// Phases end at these offsets (the last at Duration): counts are kept per
	// phase of the request's send time.
	Phases []time.Duration `json:"phases"`
	// Replicas, above 1, adds a run through that many sidecars (each its
	// own server, caller and data folder, sharing nothing) in front of the
	// same model, the load spread round-robin over them.
	Replicas int `json:"replicas,omitempty"`
	// ClientTimeout, when set, makes every client give up after it; the
	// runs through Breakwater are then one per way of stating it (the
	// Stainless SDKs' headers, and none).
	ClientTimeout time.Duration `json:"client_timeout,omitempty"`
	// Redis, for a run through several sidecars, gives them one Redis
	// ([fleet] redis_url, a fresh key prefix per run), so they share one
	// capacity estimate (issue 38): RedisURL's, else a redis-server the run
	// starts (fleet/redistest).
	Redis    bool   `json:"redis,omitempty"`
	RedisURL string `json:"-"`
	// Tokens, when set, limits the model by tokens per minute (and
	// Capacity, 0, not at all by calls in flight), and makes the load a mix
	// of short and long requests (issue 37).
	Tokens *TokenLoad `json:"tokens,omitempty"`
}

// TokenLoad is a token-limited peak: the model's budget, as OpenAI counts
// it (input plus max tokens at admission, sim.Options.TPM), and the two
// sizes of request the load mixes.
type TokenLoad struct {
	// TPM is the model's tokens per minute; its bucket holds Burst of it.
	TPM   int           `json:"tpm"`
	Burst time.Duration `json:"burst"`
	// LongEvery makes every LongEvery-th request long (5: 20 %), the
	// others short.
	LongEvery int         `json:"long_every"`
	Short     RequestSize `json:"short"`
	Long      RequestSize `json:"long"`
}

// RequestSize is a request's cost to the budget: its input tokens (as the
// simulated model counts them) and its max_tokens.
type RequestSize struct {
	Input     int `json:"input"`
	MaxTokens int `json:"max_tokens"`
}

// Cost is what the budget charges the request.
func (r RequestSize) Cost() int { return r.Input + r.MaxTokens }

// budget is the most the model can admit in d: its bucket, full at the
// start, and what refills it in d.
func (t *TokenLoad) budget(d time.Duration) int64 {
	return int64(float64(t.TPM) * (t.Burst + d).Minutes())
}

// tokenRate is the load, in requests per second, that offers the model
// times its budget with the mix of t.
func (t *TokenLoad) tokenRate(times float64) float64 {
	return times * float64(t.TPM) / 60 / t.meanCost()
}

// meanCost is a request's mean cost in the mix.
func (t *TokenLoad) meanCost() float64 {
	n := float64(max(t.LongEvery, 1))
	return (float64(t.Long.Cost()) + (n-1)*float64(t.Short.Cost())) / n
}

// tokensLoad is the "tokens" scenario's (issue 37's "Must show"): a model
// limited by 240,000 tokens a minute only, whose bucket holds 10 s of it
// (OpenAI enforces its limits over periods shorter than a minute), offered
// 3× that for 30 s: 80 % short requests (200 tokens: 50 in, max_tokens
// 150) and 20 % long ones (5,000: 1,000 in, max_tokens 4,000).
var tokensLoad = TokenLoad{TPM: 240000, Burst: 10 * time.Second, LongEvery: 5,
	Short: RequestSize{Input: 50, MaxTokens: 150}, Long: RequestSize{Input: 1000, MaxTokens: 4000}}

// Scenarios are the peaks of the demo, named by -scenario.
var Scenarios = map[string]Scenario{
	// A model that takes 4 calls at once, 300 ms each (~13 answers/s), at 3×.
	"capacity": {
		Name: "capacity", Capacity: 4, Latency: 300 * time.Millisecond,
		Rate: 40, Duration: 15 * time.Second, Phases: []time.Duration{15 * time.Second},
	},
	// ~27 answers/s (8 at once, 300 ms), down to ~7/s (2 at once) from 5 s
	// to 10 s, then back; 30 requests/s.
	"drop": {
		Name: "drop", Capacity: 8, Latency: 300 * time.Millisecond,
		Steps: []sim.Step{{After: 5 * time.Second, Capacity: 2}, {After: 10 * time.Second, Capacity: 8}},
		Rate:  30, Duration: 15 * time.Second,
		Phases: []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second},
	},
	// A model limited by tokens per minute only, offered 3× its budget
	// for 30 s by short and long requests (tokensLoad); clients wait.
	"tokens": {
		Name: "tokens", Latency: 300 * time.Millisecond,
		Rate: tokensLoad.tokenRate(3), Duration: 30 * time.Second, Phases: []time.Duration{30 * time.Second},
		Tokens: &tokensLoad,
	},
}

// Counts are what the app and the model saw in one phase. Requests count in
// the phase they were sent in; upstream calls in the phase they reached the
// model in (the last phase, "drain", is after the load stopped).
type Counts struct {
	Phase       string `json:"phase"`
	Sent        int    `json:"sent"`
	Answered    int    `json:"answered"`
	RateLimited int    `json:"rate_limited"` // 429s seen by the app
	ServerError int    `json:"server_errors"`
	Other       int    `json:"other_errors"` // transport errors, client timeouts, other statuses
	// NoRetryAfter counts 429s and 503s without a Retry-After header;
	// PastDeadline answers that came later than the request deadline.
	NoRetryAfter int   `json:"no_retry_after"`
	PastDeadline int   `json:"past_deadline"`
	Upstream     int64 `json:"upstream_calls"`
	Upstream429  int64 `json:"upstream_429s"`
	// Abandoned counts the model's answers whose client had gone: produced
	// (and billed, at a real provider) for nobody.
	Abandoned int64 `json:"abandoned"`
	// Reached counts requests that reached the model at least once.
	Reached int64 `json:"reached"`
	// SentLong and AnsweredLong count the long requests of a token
	// scenario (the others are short).
	SentLong     int `json:"sent_long,omitempty"`
	AnsweredLong int `json:"answered_long,omitempty"`
}

func (c *Counts) add(o Counts) {
	c.Sent += o.Sent
	c.Answered += o.Answered
	c.RateLimited += o.RateLimited
	c.ServerError += o.ServerError
	c.Other += o.Other
	c.NoRetryAfter += o.NoRetryAfter
	c.PastDeadline += o.PastDeadline
	c.Upstream += o.Upstream
	c.Upstream429 += o.Upstream429
	c.Abandoned += o.Abandoned
	c.Reached += o.Reached
	c.SentLong += o.SentLong
	c.AnsweredLong += o.AnsweredLong
}

// longRatio is how often long requests were answered, relative to short
// ones: 1 when both were answered as often; 0 when either kind was none.
func (c Counts) longRatio() float64 {
	short, answeredShort := c.Sent-c.SentLong, c.Answered-c.AnsweredLong
	if c.SentLong == 0 || short == 0 || answeredShort == 0 {
		return 0
	}
	return (float64(c.AnsweredLong) / float64(c.SentLong)) / (float64(answeredShort) / float64(short))
}

// Side is one way of sending the load.
type Side struct {
	Phases []Counts `json:"phases"`
	Total  Counts   `json:"total"`
	// P50 and P99 are over answered requests.
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	// PerReplica counts answers per sidecar, for a run through several.
	PerReplica []int `json:"per_replica,omitempty"`
	// Early429 is the model's 429s in the load's first earlyWindow: what a
	// fleet's cold start costs (issue 38).
	Early429 int64 `json:"upstream_429s_early"`
	// TokensAdmitted is what the model's token budget admitted while the
	// load lasted, and TokenBudget the most it could have (its bucket full
	// at the start, and its refill), in a token scenario.
	TokensAdmitted int64 `json:"tokens_admitted,omitempty"`
	TokenBudget    int64 `json:"token_budget,omitempty"`
}

// PeakRun is one more way of sending the load, beside straight and through one
// sidecar: through a fleet, or with a client deadline header.
type PeakRun struct {
	Name string `json:"name"`
	// Replicas is how many sidecars the load was spread over; Header the
	// deadline header the clients sent ("" for none).
	Replicas int    `json:"replicas"`
	Header   string `json:"header,omitempty"`
	Side
}

// PeakResult is a scenario's straight-versus-through table.
type PeakResult struct {
	Scenario Scenario      `json:"scenario"`
	Deadline time.Duration `json:"deadline"`
	Straight Side          `json:"straight"`
	Through  Side          `json:"through"`
	// More are the fleet run (Scenario.Replicas) or, with a client timeout,
	// the runs with each deadline header.
	More []PeakRun `json:"more,omitempty"`
}

// Peak runs a scenario straight at a fresh simulated model, then through
// Breakwater (default configuration, only the upstream's URL set) at another,
// then through Scenario.Replicas sidecars at a third. With a client timeout
// the clients give up after it: the run through one sidecar sends no
// deadline header, and one more run each sends X-Stainless-Timeout and
// X-Stainless-Read-Timeout.
func Peak(ctx context.Context, sc Scenario, logger *slog.Logger, status io.Writer) (*PeakResult, error) {
	deadline := config.Default().Retry.Deadline
	res := &PeakResult{Scenario: sc, Deadline: deadline}
	var err error
	if res.Straight, err = runStraight(ctx, sc, status); err != nil {
		return nil, err
	}
	if res.Through, err = runThrough(ctx, sc, 1, "", logger, status); err != nil {
		return nil, err
	}
	if sc.Replicas > 1 {
		side, err := runThrough(ctx, sc, sc.Replicas, "", logger, status)
		if err != nil {
			return nil, err
		}
		res.More = append(res.More, PeakRun{Name: fmt.Sprintf("%d replicas", sc.Replicas), Replicas: sc.Replicas, Side: side})
		if sc.ClientTimeout > 0 {
			// Issue 38: the fleet with the header too.
			h := deadlineHeaders[0]
			if side, err = runThrough(ctx, sc, sc.Replicas, h, logger, status); err != nil {
				return nil, err
			}
			res.More = append(res.More, PeakRun{Name: fmt.Sprintf("%d replicas, %s", sc.Replicas, h), Replicas: sc.Replicas, Header: h, Side: side})
		}
	}
	if sc.ClientTimeout > 0 {
		for _, h := range deadlineHeaders {
			side, err := runThrough(ctx, sc, 1, h, logger, status)
			if err != nil {
				return nil, err
			}
			res.More = append(res.More, PeakRun{Name: h, Replicas: 1, Header: h, Side: side})
		}
	}
	return res, nil
}

// peakModel is the simulated model of a scenario.
func peakModel(sc Scenario) *sim.Sim {
	o := sim.Options{Capacity: sc.Capacity, Steps: sc.Steps, Latency: sc.Latency, Jitter: sc.Jitter,
		Dist: sim.DistUniform, RetryAfter: time.Second, Seed: 1}
	if t := sc.Tokens; t != nil {
		o.TPM, o.Burst = t.TPM, t.Burst
	}
	return sim.New(o)
}

// runStraight sends the scenario's load straight at a fresh simulated model.
func runStraight(ctx context.Context, sc Scenario, status io.Writer) (Side, error) {
	direct := peakModel(sc)
	dsrv := httptest.NewServer(direct)
	defer dsrv.Close()
	statusf(status, "%s: %.0f req/s for %s straight at the model", sc.Name, sc.Rate, sc.Duration)
	side, err := drive(ctx, sc, []string{dsrv.URL}, direct, config.Default().Retry.Deadline, "")
	if err != nil {
		return Side{}, fmt.Errorf("drive the model: %w", err)
	}
	return side, nil
}

// runThrough sends the scenario's load through replicas sidecars (default
// configuration, only the upstream's URL set), round-robin, in front of a
// fresh simulated model; header, if set, is the deadline header the clients
// state their timeout in.
func runThrough(ctx context.Context, sc Scenario, replicas int, header string, logger *slog.Logger, status io.Writer) (Side, error) {
	model := peakModel(sc)
	msrv := httptest.NewServer(model)
	defer msrv.Close()
	urls := make([]string, 0, replicas)
	o := Options{Logger: logger}.withLogger()
	if sc.Redis && replicas > 1 {
		o.RedisURL = sc.RedisURL
		if o.RedisURL == "" {
			srv, err := redistest.Run()
			if err != nil {
				return Side{}, fmt.Errorf("-redis: %w", err)
			}
			defer srv.Kill()
			o.RedisURL = srv.URL()
		}
		o.RedisPrefix = "breakwater-demo-" + rand.Text() // nothing left from an earlier run
	}
	for range replicas {
		url, stop, err := startBreakwater(ctx, o, msrv.URL+"/v1")
		if err != nil {
			return Side{}, err
		}
		defer stop()
		urls = append(urls, url)
	}
	what := "one sidecar"
	if replicas > 1 {
		what = fmt.Sprintf("%d sidecars", replicas)
	}
	if o.RedisURL != "" {
		what += " sharing Redis"
	}
	if header != "" {
		what += ", clients sending " + header
	}
	if sc.ClientTimeout > 0 {
		what += fmt.Sprintf(", clients giving up after %s", sc.ClientTimeout)
	}
	statusf(status, "%s: the same load through %s (default settings)", sc.Name, what)
	side, err := drive(ctx, sc, urls, model, config.Default().Retry.Deadline, header)
	if err != nil {
		return Side{}, fmt.Errorf("drive breakwater: %w", err)
	}
	return side, nil
}

// deadlineHeaders are the client deadline headers the demo tries: what the
// OpenAI and Anthropic Node SDKs send, and what their Python SDKs send.
var deadlineHeaders = []string{"X-Stainless-Timeout", "X-Stainless-Read-Timeout"}

func (o Options) withLogger() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// outcome is one request's result.
type outcome struct {
	phase   int
	replica int
	long    bool // a token scenario's long request
	status  int  // 0: transport error or client timeout
	hasRA   bool
	latency time.Duration
}

// drive sends the scenario's load to urls, round-robin, on schedule and
// counts per phase; m is the model behind them, read at phase boundaries.
// header names the deadline header the clients send, if any.
// earlyWindow is the start of a load whose 429s Side.Early429 counts.
const earlyWindow = 5 * time.Second

func drive(ctx context.Context, sc Scenario, urls []string, m *sim.Sim, deadline time.Duration, header string) (Side, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	// The app waits a little longer than the deadline, to see whether any
	// answer comes late; an impatient one gives up at its own timeout.
	timeout := deadline + 5*time.Second
	if sc.ClientTimeout > 0 {
		timeout = sc.ClientTimeout
	}
	n := int(sc.Rate * sc.Duration.Seconds())
	interval := time.Duration(float64(time.Second) / sc.Rate)
	outs := make([]outcome, n)
	snaps := make([]sim.Stats, 0, len(sc.Phases)+1)
	var wg sync.WaitGroup
	start := time.Now()
	var early atomic.Pointer[sim.Stats]
	earlyAt := time.AfterFunc(earlyWindow, func() { s := m.Stats(); early.Store(&s) })
	defer earlyAt.Stop()
	next := 0
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		for next < len(sc.Phases) && due.Sub(start) >= sc.Phases[next] {
			snaps = append(snaps, m.Stats())
			next++
		}
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return Side{}, ctx.Err()
			}
		}
		phase := 0
		for phase < len(sc.Phases)-1 && due.Sub(start) >= sc.Phases[phase] {
			phase++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := i % len(urls)
			body, long := requestBody(sc, i)
			outs[i] = ask(ctx, client, urls[r], body, timeout, header)
			outs[i].phase, outs[i].replica, outs[i].long = phase, r, long
		}()
	}
	for next < len(sc.Phases) {
		time.Sleep(time.Until(start.Add(sc.Phases[next])))
		snaps = append(snaps, m.Stats())
		next++
	}
	wg.Wait()
	snaps = append(snaps, m.Stats())

	side := Side{Phases: make([]Counts, len(sc.Phases)+1)}
	if e := early.Load(); e != nil {
		side.Early429 = e.RateLimited
	}
	if len(urls) > 1 {
		side.PerReplica = make([]int, len(urls))
	}
	for i, end := range sc.Phases {
		side.Phases[i].Phase = fmt.Sprintf("%s–%s", phaseStart(sc.Phases, i), end)
	}
	side.Phases[len(sc.Phases)].Phase = "drain"
	var lat []time.Duration
	for _, o := range outs {
		c := &side.Phases[o.phase]
		c.Sent++
		if o.long {
			c.SentLong++
		}
		switch {
		case o.status/100 == 2:
			c.Answered++
			if o.long {
				c.AnsweredLong++
			}
			lat = append(lat, o.latency)
			if side.PerReplica != nil {
				side.PerReplica[o.replica]++
			}
		case o.status == http.StatusTooManyRequests:
			c.RateLimited++
		case o.status >= 500:
			c.ServerError++
		default:
			c.Other++
		}
		if (o.status == http.StatusTooManyRequests || o.status == http.StatusServiceUnavailable) && !o.hasRA {
			c.NoRetryAfter++
		}
		if o.latency > deadline+time.Second {
			c.PastDeadline++
		}
	}
	var prev sim.Stats
	for i, s := range snaps {
		side.Phases[i].Upstream = s.Calls - prev.Calls
		side.Phases[i].Upstream429 = s.RateLimited - prev.RateLimited
		side.Phases[i].Abandoned = s.Abandoned - prev.Abandoned
		side.Phases[i].Reached = s.Distinct - prev.Distinct
		prev = s
	}
	for _, c := range side.Phases {
		side.Total.add(c)
	}
	side.Total.Phase = "total"
	if sc.Tokens != nil {
		// The snapshot at the end of the last phase is the end of the load.
		side.TokensAdmitted = snaps[len(sc.Phases)-1].TokensAdmitted
		side.TokenBudget = sc.Tokens.budget(sc.Duration)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		side.P50 = lat[len(lat)/2]
		side.P99 = lat[min(len(lat)*99/100, len(lat)-1)]
	}
	return side, nil
}

func phaseStart(ends []time.Duration, i int) time.Duration {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}

// requestBody is request i of sc: a question no other request repeats,
// and, in a token scenario, a context (a system prompt) and max_tokens that
// make it short or long (every LongEvery-th).
func requestBody(sc Scenario, i int) ([]byte, bool) {
	question := "Request " + strconv.Itoa(i) + ": " + prompt(i)
	messages := []map[string]string{{"role": "user", "content": question}}
	req := map[string]any{"model": "gpt-test"}
	long := false
	if t := sc.Tokens; t != nil {
		long = t.LongEvery > 0 && i%t.LongEvery == t.LongEvery-1
		size := t.Short
		if long {
			size = t.Long
		}
		// The simulated model counts a word a token; the context's words
		// are three letters, so a character count (4 a token, with the
		// space) agrees with it.
		n := max(size.Input-len(strings.Fields(question)), 1)
		messages = append([]map[string]string{{"role": "system", "content": filler(n)}}, messages...)
		req["max_tokens"] = size.MaxTokens
	}
	req["messages"] = messages
	body, _ := json.Marshal(req)
	return body, long
}

// filler is a context of n three-letter words.
func filler(n int) string {
	words := []string{"the", "sea", "and", "sky", "met", "far", "out", "bay", "fog", "old", "net", "oar"}
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[i%len(words)])
	}
	return b.String()
}

// ask sends body, a request no other repeats. header, if set, states the
// client's timeout in seconds, as the Stainless SDKs do.
func ask(ctx context.Context, client *http.Client, url string, body []byte, timeout time.Duration, header string) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer sk-demo"}}
	if header != "" {
		h.Set(header, strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
	}
	status, rh, latency := post(ctx, client, url+"/v1/chat/completions", body, h)
	return outcome{status: status, hasRA: rh.Get("Retry-After") != "", latency: latency}
}

// post sends a JSON body to url with header and reads the whole answer:
// its status (0 for a transport error, a client that gave up or a cut
// body), its headers and the time it took.
func post(ctx context.Context, client *http.Client, url string, body []byte, header http.Header) (int, http.Header, time.Duration) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, http.Header{}, time.Since(start)
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, http.Header{}, time.Since(start)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, resp.Header, time.Since(start)
	}
	return resp.StatusCode, resp.Header, time.Since(start)
}

var (
	subjects = []string{"a lighthouse", "the tide", "a harbour crane", "sea glass", "a fishing fleet", "storm surge",
		"a coral reef", "the pier", "a salt marsh", "kelp forests", "a breakwater", "the estuary", "plankton"}
	asks = []string{"Explain how %s works", "Write a haiku about %s", "List three facts about %s",
		"Why does %s matter to a town", "Describe %s to a child", "Compare %s with a river delta",
		"What would a painter notice about %s"}
	twists = []string{"in winter", "at night", "during a storm", "a century ago", "in the tropics", "after a flood",
		"from a boat", "in one sentence", "for an engineer", "in spring", "for a poet"}
)

// prompt makes a distinct question for each i, so neither tier of the cache
// can answer one request with another's answer.
func prompt(i int) string {
	s := subjects[i%len(subjects)]
	a := asks[(i/len(subjects))%len(asks)]
	t := twists[(i/(len(subjects)*len(asks)))%len(twists)]
	return fmt.Sprintf(a, s) + " " + t + "?"
}

func statusf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
