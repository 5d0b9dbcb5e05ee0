package loadgen

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/breakwater-dev/breakwater/lib/tty"
)

// DefaultPairs is where -workload qqp looks for the pairs when -pairs is not
// given: the shared data folder next to a checkout.
const DefaultPairs = "docs/data/qqp-dev.jsonl"

// Run is the bench command:
//
//	breakwater bench -url http://127.0.0.1:8080 -rate 50 -duration 20s \
//	    -workload builtin|qqp|FILE [-pairs qqp-dev.jsonl] -repeat 0.3 -paraphrase 0.2 -zipf 1.1 [-json]
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("breakwater bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "target root URL (Breakwater, the sim, or any OpenAI-compatible server)")
	fs.Float64Var(&cfg.Rate, "rate", 50, "arrival rate, requests per second (open loop)")
	fs.DurationVar(&cfg.Duration, "duration", 20*time.Second, "how long requests are started")
	fs.IntVar(&cfg.Requests, "requests", 0, "cap on scheduled requests (0: rate × duration)")
	workload := fs.String("workload", "builtin", `"builtin" (synthetic, no file), "qqp" (duplicate pairs from -pairs) or a file of questions, one per line, TAB before an optional paraphrase`)
	pairs := fs.String("pairs", DefaultPairs, "Quora question pairs (JSONL {a,b,duplicate}) for -workload qqp")
	fs.Float64Var(&cfg.Mix.Repeat, "repeat", 0.3, "share of exact repeats of earlier questions")
	fs.Float64Var(&cfg.Mix.Paraphrase, "paraphrase", 0.2, "share of paraphrases of earlier questions")
	fs.Float64Var(&cfg.Mix.Zipf, "zipf", 1.1, "Zipf exponent of question popularity (> 1)")
	fs.Uint64Var(&cfg.Mix.Seed, "seed", 1, "workload seed (same seed, same requests)")
	fs.StringVar(&cfg.Model, "model", "gpt-test", "model of every request")
	fs.StringVar(&cfg.APIKey, "key", "sk-breakwater-bench", "bearer token sent as Authorization")
	fs.BoolVar(&cfg.Stream, "stream", false, "ask for streamed (SSE) answers")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", 1024, "requests in flight beyond which due requests are dropped")
	fs.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "per-request timeout")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("parse flags: unexpected argument %q", fs.Arg(0))
	}
	if err := cfg.Mix.Validate(); err != nil {
		return err
	}
	items, err := LoadWorkload(*workload, *pairs, cfg.Mix.Seed)
	if err != nil {
		return err
	}
	cfg.Items = items
	if !*quiet && tty.IsTerminal(stderr) {
		cfg.Progress = stderr
	}
	s, err := Bench(ctx, cfg)
	if s == nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if e := enc.Encode(s); e != nil {
			return fmt.Errorf("write summary: %w", e)
		}
	} else {
		s.WriteText(stdout)
	}
	return err
}

// LoadWorkload resolves a -workload value: "builtin", "qqp" (read from
// pairs) or a file of questions.
func LoadWorkload(workload, pairs string, seed uint64) ([]Item, error) {
	switch workload {
	case "", "builtin":
		return Builtin(seed), nil
	case "qqp":
		return LoadQQP(pairs, seed)
	default:
		return LoadQuestions(workload)
	}
}

// Validate names the first flag of m that is out of range.
func (m Mix) Validate() error {
	if m.Repeat < 0 || m.Paraphrase < 0 || m.Repeat+m.Paraphrase > 1 {
		return fmt.Errorf("parse flags: -repeat %v and -paraphrase %v: each must be >= 0 and their sum <= 1", m.Repeat, m.Paraphrase)
	}
	if m.Zipf <= 1 {
		return fmt.Errorf("parse flags: -zipf %v: must be > 1", m.Zipf)
	}
	return nil
}
