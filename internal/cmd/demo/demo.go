// Package demo shows Breakwater absorbing a peak without an API key: a simulated model with a small capacity, a load above it, first straight at the model and then through Breakwater, side by side.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/internal/app"
	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"
	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

// Options configure a demo run. Zero values take the defaults of Run's flags.
type Options struct {
	// Capacity is the simulated model's max in flight. Zero: 4.
	Capacity int
	// Latency and Jitter shape the model's time to answer: Latency plus a
	// uniform draw in [0, 2·Jitter]. Zero Latency: 200ms; zero Jitter: 100ms
	// (negative: none).
	Latency, Jitter time.Duration
	// Rate is the load in requests per second. Zero: 3× the model's
	// throughput (Capacity / mean latency).
	Rate float64
	// Duration is each phase's length. Zero: 10s.
	Duration time.Duration
	// Items and Mix are the workload (see loadgen). Nil Items: the built-in
	// synthetic set. Zero Mix: 50% repeats, 20% paraphrases, Zipf 1.1,
	// seed 1.
	Items []loadgen.Item
	Mix   loadgen.Mix
	// Logger receives Breakwater's log. Nil: discarded.
	Logger *slog.Logger
	// Progress receives the load generator's progress bar. Nil: none.
	Progress io.Writer
	// Status receives one line as each phase starts. Nil: none.
	Status io.Writer
	// DataDir holds Breakwater's cache files. Empty: a temporary folder,
	// removed at the end.
	DataDir string
	// API is the wire API the app speaks: loadgen.APIOpenAI (default, JSON
	// answers; the model refuses with 429) or loadgen.APIAnthropic (Messages
	// streams; the model refuses with 529 overloaded_error and cuts CutRate
	// of its streams with an error event halfway).
	API string
	// CutRate is the share of Messages streams the model cuts. Zero: 0.1.
	CutRate float64
	// Judge is the sidecar's [cache.verify] judge. Empty: the default.
	Judge string
	// RedisURL and RedisPrefix are the sidecar's [fleet] redis_url and
	// redis_prefix. Empty: no Redis, the default.
	RedisURL, RedisPrefix string
}

// Phase is one side of the table.
type Phase struct {
	Name  string           `json:"name"`
	Bench *loadgen.Summary `json:"bench"`
	// Model is the simulated model's counters for this phase alone.
	Model sim.Stats `json:"model"`
}

// Result is the side-by-side.
type Result struct {
	Options    Options `json:"-"`
	Throughput float64 `json:"model_throughput"` // requests/s the model can answer
	Direct     Phase   `json:"direct"`
	Breakwater Phase   `json:"breakwater"`
}

func (o *Options) defaults() {
	if o.Capacity <= 0 {
		o.Capacity = 4
	}
	if o.Latency <= 0 {
		o.Latency = 200 * time.Millisecond
	}
	if o.Jitter == 0 {
		o.Jitter = 100 * time.Millisecond
	}
	if o.Jitter < 0 {
		o.Jitter = 0
	}
	if o.Rate <= 0 {
		o.Rate = 3 * throughput(*o)
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Mix == (loadgen.Mix{}) {
		o.Mix = loadgen.Mix{Repeat: 0.5, Paraphrase: 0.2, Zipf: 1.1, Seed: 1}
	}
	if o.Items == nil {
		o.Items = loadgen.Builtin(o.Mix.Seed)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.API == "" {
		o.API = loadgen.APIOpenAI
	}
	if o.CutRate == 0 {
		o.CutRate = 0.1
	}
}

// throughput is what the model answers per second when kept full.
func throughput(o Options) float64 {
	return float64(o.Capacity) / (o.Latency + o.Jitter).Seconds()
}

// Demo runs both phases with the same workload, each against a fresh
// simulated model with the same options.
func Demo(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	res := &Result{Options: o, Throughput: throughput(o)}
	simOpts := sim.Options{Capacity: o.Capacity, Latency: o.Latency, Jitter: o.Jitter, Dist: sim.DistUniform, RetryAfter: time.Second, Seed: 1,
		Same: SameItems(o.Items)}
	if o.API == loadgen.APIAnthropic {
		simOpts.CutRate = o.CutRate
	}
	bench := loadgen.Config{
		Rate: o.Rate, Duration: o.Duration, Items: o.Items, Mix: o.Mix,
		API: o.API, Stream: o.API == loadgen.APIAnthropic,
		Progress: o.Progress,
		// The app waits a little longer than Breakwater's request deadline.
		Timeout: config.Default().Retry.Deadline + 5*time.Second,
	}

	direct := sim.New(simOpts)
	dsrv := httptest.NewServer(direct)
	defer dsrv.Close()
	status(o.Status, "phase 1/2: %.0f req/s for %s straight at the model (capacity %d, ~%.0f req/s)", o.Rate, o.Duration, o.Capacity, res.Throughput)
	bench.URL = dsrv.URL
	s, err := loadgen.Bench(ctx, bench)
	if err != nil {
		return nil, fmt.Errorf("bench the model: %w", err)
	}
	res.Direct = Phase{Name: "straight to the model", Bench: s, Model: direct.Stats()}

	model := sim.New(simOpts)
	msrv := httptest.NewServer(model)
	defer msrv.Close()
	url, stop, err := startBreakwater(ctx, o, msrv.URL+"/v1")
	if err != nil {
		return nil, err
	}
	defer stop()
	status(o.Status, "phase 2/2: the same load through Breakwater (embedded defaults)")
	bench.URL = url
	s, err = loadgen.Bench(ctx, bench)
	if err != nil {
		return nil, fmt.Errorf("bench breakwater: %w", err)
	}
	res.Breakwater = Phase{Name: "through Breakwater", Bench: s, Model: model.Stats()}
	return res, nil
}

// SameItems is the truth the simulated model judges by: a question and its
// paraphrases ask the same thing, nothing else does.
func SameItems(items []loadgen.Item) func(a, b string) bool {
	pair := make(map[[2]string]bool, 6*len(items))
	for _, it := range items {
		texts := []string{it.Question, it.Paraphrase, it.Another}
		for i, x := range texts {
			for j, y := range texts {
				if i != j && x != "" && y != "" {
					pair[[2]string{x, y}] = true
				}
			}
		}
	}
	return func(a, b string) bool { return a == b || pair[[2]string{a, b}] }
}

// Config is the Breakwater configuration the demo runs: embedded defaults
// with the upstream pointed at upstreamURL. Nothing about the model's
// capacity is given: the caller finds it at run time.
func Config(o Options, upstreamURL, dataDir string) *config.Config {
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.ShutdownTimeout = config.Duration(5 * time.Second)
	cfg.Cache.DataDir = dataDir
	cfg.Vector.Path = filepath.Join(dataDir, "vectors")
	cfg.Upstreams[0].BaseURL = upstreamURL
	if o.Judge != "" {
		cfg.Cache.Verify.Judge = o.Judge
	}
	if o.RedisURL != "" {
		cfg.Fleet.RedisURL, cfg.Fleet.Prefix = o.RedisURL, o.RedisPrefix
	}
	return cfg
}

// startBreakwater runs Breakwater in-process on a loopback port.
func startBreakwater(ctx context.Context, o Options, upstreamURL string) (string, func(), error) {
	dir := o.DataDir
	cleanup := func() {}
	if dir == "" {
		d, err := os.MkdirTemp("", "breakwater-demo-")
		if err != nil {
			return "", nil, fmt.Errorf("create data dir: %w", err)
		}
		dir, cleanup = d, func() { os.RemoveAll(d) }
	}
	cfg := Config(o, upstreamURL, dir)
	if err := cfg.Validate(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("validate demo config: %w", err)
	}
	noEnv := func(string) string { return "" }
	a, err := app.New(ctx, cfg, app.Options{Logger: o.Logger, Env: noEnv})
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("start breakwater: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		a.Shutdown(context.Background())
		cleanup()
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- a.Serve(sctx, ln) }()
	// The demo shows semantic hits from its first questions.
	select {
	case <-a.IndexOpened():
	case <-ctx.Done():
	}
	stop := func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			o.Logger.Warn("stop breakwater", "err", err)
		}
		cleanup()
	}
	return "http://" + ln.Addr().String(), stop, nil
}

func status(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
