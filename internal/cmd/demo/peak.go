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
}

// Side is one way of sending the load.
type Side struct {
	Phases []Counts `json:"phases"`
	Total  Counts   `json:"total"`
	// P50 and P99 are over answered requests.
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
}

// PeakResult is a scenario's straight-versus-through table.
type PeakResult struct {
	Scenario Scenario      `json:"scenario"`
	Deadline time.Duration `json:"deadline"`
	Straight Side          `json:"straight"`
	Through  Side          `json:"through"`
}

// Peak runs a scenario straight at a fresh simulated model, then through
// Breakwater (default configuration, only the upstream's URL set) at another.
func Peak(ctx context.Context, sc Scenario, logger *slog.Logger, status io.Writer) (*PeakResult, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	deadline := config.Default().Retry.Deadline.D()
	res := &PeakResult{Scenario: sc, Deadline: deadline}
	simOpts := sim.Options{Capacity: sc.Capacity, Steps: sc.Steps, Latency: sc.Latency, Jitter: sc.Jitter,
		Dist: sim.DistUniform, RetryAfter: time.Second, Seed: 1}

	direct := sim.New(simOpts)
	dsrv := httptest.NewServer(direct)
	defer dsrv.Close()
	statusf(status, "%s: %.0f req/s for %s straight at the model", sc.Name, sc.Rate, sc.Duration)
	side, err := drive(ctx, sc, dsrv.URL, direct, deadline)
	if err != nil {
		return nil, fmt.Errorf("drive the model: %w", err)
	}
	res.Straight = side

	model := sim.New(simOpts)
	msrv := httptest.NewServer(model)
	defer msrv.Close()
	url, stop, err := startBreakwater(ctx, Options{Logger: logger}.withLogger(), msrv.URL+"/v1")
	if err != nil {
		return nil, err
	}
	defer stop()
	statusf(status, "%s: the same load through Breakwater (default settings)", sc.Name)
	side, err = drive(ctx, sc, url, model, deadline)
	if err != nil {
		return nil, fmt.Errorf("drive breakwater: %w", err)
	}
	res.Through = side
	return res, nil
}

func (o Options) withLogger() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// outcome is one request's result.
type outcome struct {
	phase   int
	status  int // 0: transport error or client timeout
	hasRA   bool
	latency time.Duration
}

// drive sends the scenario's load to url on schedule and counts per phase;
// m is the model behind url, read at phase boundaries.
func drive(ctx context.Context, sc Scenario, url string, m *sim.Sim, deadline time.Duration) (Side, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	// The app waits a little longer than the deadline, to see whether any
	// answer comes late.
	timeout := deadline + 5*time.Second
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
			outs[i] = ask(ctx, client, url, i, timeout)
			outs[i].phase = phase
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

// ask sends request i, a prompt no other request repeats.
func ask(ctx context.Context, client *http.Client, url string, i int, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"model": "gpt-test",
		"messages": []map[string]string{{"role": "user",
			"content": "Request " + strconv.Itoa(i) + ": " + prompt(i)}},
	})
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return outcome{latency: time.Since(start)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-demo")
	resp, err := client.Do(req)
	if err != nil {
		return outcome{latency: time.Since(start)}
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	o := outcome{status: resp.StatusCode, hasRA: resp.Header.Get("Retry-After") != "", latency: time.Since(start)}
	if err != nil {
		o.status = 0
	}
	return o
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
