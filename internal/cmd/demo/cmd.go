package demo

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/internal/app"
	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"

	"github.com/breakwater-dev/breakwater/lib/tty"
)

// Run is the demo command: breakwater demo [-duration 10s] [-rate R] ...
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("breakwater demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.IntVar(&o.Capacity, "capacity", 4, "simulated model: max requests in flight")
	fs.DurationVar(&o.Latency, "latency", 200*time.Millisecond, "simulated model: minimum time per answer")
	fs.DurationVar(&o.Jitter, "jitter", 100*time.Millisecond, "simulated model: mean extra time, uniform in [0, 2×jitter]")
	fs.Float64Var(&o.Rate, "rate", 0, "load in requests/s (0: 3× what the model can answer)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of each phase")
	fs.Float64Var(&o.Mix.Repeat, "repeat", 0.5, "share of exact repeats")
	fs.Float64Var(&o.Mix.Paraphrase, "paraphrase", 0.2, "share of paraphrases")
	fs.Float64Var(&o.Mix.Zipf, "zipf", 1.1, "Zipf exponent of question popularity (> 1)")
	fs.Uint64Var(&o.Mix.Seed, "seed", 1, "workload seed")
	workload := fs.String("workload", "builtin", `"builtin", "qqp" (with -pairs) or a file of questions`)
	pairs := fs.String("pairs", loadgen.DefaultPairs, "Quora question pairs for -workload qqp")
	scenario := fs.String("scenario", "cache,drop", `comma-separated: "cache" (repeats and paraphrases at 3× capacity), "capacity" (distinct prompts at 3× capacity), "drop" (distinct prompts while the capacity drops and comes back), "tokens" (a model limited by tokens per minute only, offered 3× its budget for 30 s by 80 % short and 20 % long requests)`)
	fs.StringVar(&o.API, "api", loadgen.APIOpenAI, `wire API of the app: "openai" (Chat Completions) or "anthropic" (Messages streams; the model answers 529 beyond capacity and cuts some streams)`)
	fs.StringVar(&o.Judge, "judge", "", `the sidecar's [cache.verify] judge ("auto", "none", ...; default: the configuration's default, auto)`)
	fs.Float64Var(&o.CutRate, "cut-rate", 0.1, "-api anthropic: share of the model's streams cut by an error event halfway, in [0,1]")
	replicas := fs.Int("replicas", 1, `peak scenarios: also run the load through this many sidecars (each its own server, caller and data, sharing nothing) in front of the same model`)
	clientTimeout := fs.Duration("client-timeout", 0, `peak scenarios: every client gives up after this long (0: clients wait); adds runs whose clients state it in X-Stainless-Timeout and X-Stainless-Read-Timeout`)
	redis := fs.Bool("redis", false, `peak scenarios with -replicas: the replicas share one Redis ([fleet] redis_url; a redis-server started for each run, or -redis-url), so they share one capacity estimate`)
	redisURL := fs.String("redis-url", "", "with -redis: use this Redis (redis://host:port) instead of starting one")
	matrix := fs.Bool("matrix", false, `run every peak scenario and each API's retry storm, each row against its targets; print one table (row, figure, target, PASS/FAIL) and fail if any target is missed (about 15 min; -scenario, -replicas, -client-timeout and the model and workload flags do not apply)`)
	short := fs.Bool("short", false, "with -matrix: the CI subset (the capacity peak cut to 6s through one sidecar and 3 replicas, and the retry storms; a few minutes)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	verbose := fs.Bool("v", false, "show Breakwater's log (warnings and errors) on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("parse flags: unexpected argument %q", fs.Arg(0))
	}
	if *redisURL != "" && !*redis {
		return fmt.Errorf("parse flags: -redis-url: only with -redis")
	}
	if *short && !*matrix {
		return fmt.Errorf("parse flags: -short: only with -matrix")
	}
	if *matrix {
		return runMatrix(ctx, fs, *short, *asJSON, *verbose, stdout, stderr)
	}
	if *replicas < 1 || *replicas > 64 {
		return fmt.Errorf("parse flags: -replicas %d: must be in [1,64]", *replicas)
	}
	if *clientTimeout < 0 {
		return fmt.Errorf("parse flags: -client-timeout %s: must be >= 0", *clientTimeout)
	}
	if o.Capacity < 1 {
		return fmt.Errorf("parse flags: -capacity %d: must be >= 1", o.Capacity)
	}
	if o.API != loadgen.APIOpenAI && o.API != loadgen.APIAnthropic {
		return fmt.Errorf("parse flags: -api %q: want %q or %q", o.API, loadgen.APIOpenAI, loadgen.APIAnthropic)
	}
	if o.CutRate < 0 || o.CutRate > 1 {
		return fmt.Errorf("parse flags: -cut-rate %v: must be in [0,1]", o.CutRate)
	}
	if o.Jitter == 0 {
		o.Jitter = -1 // explicit zero: no jitter
	}
	if err := o.Mix.Validate(); err != nil {
		return err
	}
	items, err := loadgen.LoadWorkload(*workload, *pairs, o.Mix.Seed)
	if err != nil {
		return err
	}
	o.Items = items
	if *verbose {
		o.Logger = app.NewLogger(stderr, "warn", "text")
	} else {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Status = stderr
	if tty.IsTerminal(stderr) {
		o.Progress = stderr
	}
	names := strings.Split(*scenario, ",")
	for _, name := range names {
		if _, ok := Scenarios[name]; !ok && name != "cache" {
			return fmt.Errorf("parse flags: -scenario %q: want cache, capacity, drop or tokens", name)
		}
	}
	var results []any
	for _, name := range names {
		var res interface{ WriteTable(io.Writer) }
		if name == "cache" {
			r, err := Demo(ctx, o)
			if err != nil {
				return err
			}
			res = r
		} else {
			sc := Scenarios[name]
			sc.Replicas, sc.ClientTimeout = *replicas, *clientTimeout
			sc.Redis, sc.RedisURL = *redis, *redisURL
			r, err := Peak(ctx, sc, o.Logger, o.Status)
			if err != nil {
				return err
			}
			res = r
		}
		if *asJSON {
			results = append(results, res)
			continue
		}
		res.WriteTable(stdout)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	}
	return nil
}

// runMatrix is demo -matrix: the rows of MatrixRows, one table, and an
// error (a non-zero exit) when a check fails. It takes no flag that would
// change a row: the rows are the targets' scenarios.
func runMatrix(ctx context.Context, fs *flag.FlagSet, short, asJSON, verbose bool, stdout, stderr io.Writer) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "matrix", "short", "json", "v":
		default:
			bad = append(bad, "-"+f.Name)
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("parse flags: %s: not with -matrix (its rows are fixed; -short, -json and -v apply)", strings.Join(bad, ", "))
	}
	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = app.NewLogger(stderr, "warn", "text")
	}
	res, err := Matrix(ctx, MatrixRows(short), logger, stderr)
	if err != nil {
		return err
	}
	res.Short = short
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	} else {
		res.WriteTable(stdout)
	}
	return res.Err()
}
