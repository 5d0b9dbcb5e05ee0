package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/config"
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
}

// Scenarios are the two peaks of the demo, named by -scenario.
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
	deadline := config.Default().Retry.Deadline.D()
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
	return sim.New(sim.Options{Capacity: sc.Capacity, Steps: sc.Steps, Latency: sc.Latency, Jitter: sc.Jitter,
		Dist: sim.DistUniform, RetryAfter: time.Second, Seed: 1})
}

// runStraight sends the scenario's load straight at a fresh simulated model.
func runStraight(ctx context.Context, sc Scenario, status io.Writer) (Side, error) {
	direct := peakModel(sc)
	dsrv := httptest.NewServer(direct)
	defer dsrv.Close()
	statusf(status, "%s: %.0f req/s for %s straight at the model", sc.Name, sc.Rate, sc.Duration)
	side, err := drive(ctx, sc, []string{dsrv.URL}, direct, config.Default().Retry.Deadline.D(), "")
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
	for range replicas {
		url, stop, err := startBreakwater(ctx, Options{Logger: logger}.withLogger(), msrv.URL+"/v1")
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
	if header != "" {
		what += ", clients sending " + header
	}
	if sc.ClientTimeout > 0 {
		what += fmt.Sprintf(", clients giving up after %s", sc.ClientTimeout)
	}
	statusf(status, "%s: the same load through %s (default settings)", sc.Name, what)
	side, err := drive(ctx, sc, urls, model, config.Default().Retry.Deadline.D(), header)
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
	status  int // 0: transport error or client timeout
	hasRA   bool
	latency time.Duration
}

// drive sends the scenario's load to urls, round-robin, on schedule and
// counts per phase; m is the model behind them, read at phase boundaries.
// header names the deadline header the clients send, if any.
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
			outs[i] = ask(ctx, client, urls[r], i, timeout, header)
			outs[i].phase, outs[i].replica = phase, r
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
		switch {
		case o.status/100 == 2:
			c.Answered++
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

// ask sends request i, a prompt no other request repeats. header, if set,
// states the client's timeout in seconds, as the Stainless SDKs do.
func ask(ctx context.Context, client *http.Client, url string, i int, timeout time.Duration, header string) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"model": "gpt-test",
		"messages": []map[string]string{{"role": "user",
			"content": "Request " + strconv.Itoa(i) + ": " + prompt(i)}},
	})
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
