// Package loadgen is an open-loop load generator for OpenAI-compatible chat endpoints: it replays a workload of new, repeated and paraphrased questions at a constant arrival rate and summarises what came back.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one bench run.
type Config struct {
	// URL is the target's root, e.g. "http://127.0.0.1:8080"; requests go
	// to URL + "/v1/chat/completions". A URL ending in "/v1" is accepted
	// too. Required.
	URL string
	// Rate is the arrival rate in requests per second. Required (> 0).
	Rate float64
	// Duration is how long requests are started. Zero: until Requests.
	Duration time.Duration
	// Requests caps how many requests are scheduled. Zero: Rate·Duration.
	// One of Duration and Requests must be set.
	Requests int
	// Items is the workload (see Builtin, LoadQQP, LoadQuestions). Nil:
	// Builtin(Mix.Seed).
	Items []Item
	// Mix is the share of repeats and paraphrases and the popularity law.
	Mix Mix
	// Model is the "model" of every request. Empty: "gpt-test".
	Model string
	// APIKey is sent as "Authorization: Bearer <APIKey>" (Breakwater
	// partitions its cache by it). Empty: "sk-breakwater-bench".
	APIKey string
	// Stream asks for SSE answers ("stream": true).
	Stream bool
	// API is the wire API spoken: APIOpenAI (Chat Completions, the default)
	// or APIAnthropic (Messages: POST /v1/messages, x-api-key and
	// anthropic-version headers; a stream counts as OK only when it ends
	// with message_stop and carries no error event).
	API string
	// MaxInFlight bounds requests in flight; a request due while the bound
	// is reached is not sent and counts as dropped (the generator stays
	// open-loop instead of slowing down). Zero: 1024.
	MaxInFlight int
	// Timeout bounds one request. Zero: 60s.
	Timeout time.Duration
	// Client sends the requests. Nil: a client whose transport keeps
	// MaxInFlight idle connections to the target.
	Client *http.Client
	// Progress receives a one-line progress bar (\r updates) while the run
	// lasts. Nil: none.
	Progress io.Writer
}

// Wire APIs Bench can speak.
const (
	APIOpenAI    = "openai"
	APIAnthropic = "anthropic"
)

// result is one finished request.
type result struct {
	kind    string
	cut     bool // a 200 stream that broke off
	status  int  // 0: transport error
	outcome string
	latency time.Duration
}

// Bench runs cfg to completion: it starts requests on a constant-rate
// schedule, waits for the last one (each bounded by Timeout) and summarises.
// Latency is measured from each request's scheduled start, so a target (or a
// generator) that falls behind shows up in the figures.
func Bench(ctx context.Context, cfg Config) (*Summary, error) {
	if cfg.Rate <= 0 {
		return nil, errors.New("run bench: rate must be > 0")
	}
	if cfg.Duration <= 0 && cfg.Requests <= 0 {
		return nil, errors.New("run bench: set a duration or a number of requests")
	}
	if cfg.URL == "" {
		return nil, errors.New("run bench: url is required")
	}
	n := cfg.Requests
	if byTime := int(cfg.Rate * cfg.Duration.Seconds()); cfg.Duration > 0 && (n == 0 || byTime < n) {
		n = byTime
	}
	if n < 1 {
		n = 1
	}
	if cfg.Items == nil {
		cfg.Items = Builtin(cfg.Mix.Seed)
	}
	if cfg.API == "" {
		cfg.API = APIOpenAI
	}
	if cfg.API != APIOpenAI && cfg.API != APIAnthropic {
		return nil, fmt.Errorf("run bench: api %q: want %q or %q", cfg.API, APIOpenAI, APIAnthropic)
	}
	if cfg.Model == "" {
		cfg.Model = "gpt-test"
		if cfg.API == APIAnthropic {
			cfg.Model = "claude-sim"
		}
	}
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-breakwater-bench"
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 1024
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = cfg.MaxInFlight
		tr.MaxIdleConnsPerHost = cfg.MaxInFlight
		cfg.Client = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}
	endpoint := strings.TrimRight(cfg.URL, "/")
	endpoint = strings.TrimSuffix(endpoint, "/v1") + "/v1/chat/completions"
	if cfg.API == APIAnthropic {
		endpoint = strings.TrimSuffix(endpoint, "/chat/completions") + "/messages"
	}

	plan := Plan(cfg.Items, n, cfg.Mix)
	bodies := make([][]byte, len(plan))
	for i, r := range plan {
		req := map[string]any{
			"model":    cfg.Model,
			"stream":   cfg.Stream,
			"messages": []map[string]string{{"role": "user", "content": r.Question}},
		}
		if cfg.API == APIAnthropic {
			req["max_tokens"] = 1024 // required by the Messages API
		}
		b, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		bodies[i] = b
	}

	var (
		mu       sync.Mutex
		results  = make([]result, 0, len(plan))
		wg       sync.WaitGroup
		inflight atomic.Int64
		done     atomic.Int64
		dropped  int
		late     int
	)
	prog := newProgress(cfg.Progress, len(plan), &done, &inflight)
	defer prog.stop()

	interval := time.Duration(float64(time.Second) / cfg.Rate)
	start := time.Now()
	var lastSent time.Time
loop:
	for i := range plan {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				break loop
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			break loop
		}
		// A send more than one interval (and 10ms) behind schedule is late:
		// the generator itself could not keep the rate.
		if time.Since(due) > max(interval, 10*time.Millisecond) {
			late++
		}
		if inflight.Load() >= int64(cfg.MaxInFlight) {
			dropped++
			done.Add(1)
			continue
		}
		inflight.Add(1)
		lastSent = time.Now()
		wg.Go(func() {
			defer inflight.Add(-1)
			r := send(ctx, cfg, endpoint, bodies[i], due)
			r.kind = plan[i].Kind
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
			done.Add(1)
		})
	}
	sendSpan := lastSent.Sub(start)
	wg.Wait()
	prog.stop()
	s := summarise(results, cfg, len(plan), dropped, late, sendSpan, time.Since(start))
	if err := ctx.Err(); err != nil {
		return s, fmt.Errorf("run bench: %w", err)
	}
	return s, nil
}

// send does one request and reads the whole answer (every SSE event).
func send(ctx context.Context, cfg Config, endpoint string, body []byte, due time.Time) result {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return result{latency: time.Since(due)}
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.API == APIAnthropic {
		req.Header.Set("X-Api-Key", cfg.APIKey)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return result{latency: time.Since(due)}
	}
	var tail streamTail
	_, err = io.Copy(&tail, resp.Body)
	resp.Body.Close()
	r := result{status: resp.StatusCode, outcome: resp.Header.Get("X-Breakwater-Cache"), latency: time.Since(due)}
	if err != nil {
		r.status = 0 // a body cut short is an error, whatever the status said
	}
	if cfg.API == APIAnthropic && cfg.Stream && r.status == http.StatusOK {
		r.cut = tail.sawError || !tail.sawStop
	}
	return r
}

// streamTail watches a Messages stream go by for its error and
// message_stop events, keeping only a line's worth of bytes.
type streamTail struct {
	line              []byte
	sawError, sawStop bool
}

func (t *streamTail) Write(p []byte) (int, error) {
	for _, c := range p {
		if c != '\n' {
			if len(t.line) < 64 {
				t.line = append(t.line, c)
			}
			continue
		}
		switch strings.TrimSpace(string(t.line)) {
		case "event: error":
			t.sawError = true
		case "event: message_stop":
			t.sawStop = true
		}
		t.line = t.line[:0]
	}
	return len(p), nil
}
