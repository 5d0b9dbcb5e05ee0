package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Run is the sim command: breakwater sim -listen 127.0.0.1:9000 [flags].
// It serves until ctx ends.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("breakwater sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	listen := fs.String("listen", "127.0.0.1:9000", "host:port to serve on")
	fs.DurationVar(&o.Latency, "latency", 300*time.Millisecond, "fixed time to the first byte")
	fs.DurationVar(&o.Jitter, "jitter", 100*time.Millisecond, "mean of the random latency added to -latency")
	fs.StringVar(&o.Dist, "dist", DistExponential, "jitter distribution: exponential, lognormal or uniform")
	fs.DurationVar(&o.PerToken, "per-token", 0, "generation time per completion token (stream chunk spacing)")
	fs.IntVar(&o.Capacity, "capacity", 8, "max model calls in flight; beyond it 429 + Retry-After (0: unlimited)")
	steps := fs.String("steps", "", `capacity changes counted from the first call, e.g. "5s:2,10s:8"`)
	fs.DurationVar(&o.RetryAfter, "retry-after", time.Second, "wait a 429 asks for")
	fs.Float64Var(&o.ErrorRate, "error-rate", 0, "share of admitted calls answered 503, in [0,1]")
	fs.IntVar(&o.RefuseFirst, "refuse-first", 0, "refuse each prompt's first N calls in the API's own shape (OpenAI 429, Anthropic 529, Gemini 429 RESOURCE_EXHAUSTED), then answer it")
	fs.IntVar(&o.RPM, "rpm", 0, "requests per minute, every API (0: no limit)")
	fs.IntVar(&o.TPM, "tpm", 0, "tokens per minute: OpenAI's endpoints charge input + max_tokens at admission, Gemini input tokens (0: no limit)")
	fs.IntVar(&o.ITPM, "itpm", 0, "Anthropic input tokens per minute (0: no limit)")
	fs.IntVar(&o.OTPM, "otpm", 0, "Anthropic output tokens per minute, max_tokens at admission corrected to the answer's (0: no limit)")
	fs.DurationVar(&o.Burst, "burst", time.Minute, "how much of a minute's budget each -rpm/-tpm/-itpm/-otpm bucket holds (the largest request that can ever fit)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed for jitter and injected errors")
	models := fs.String("models", "gpt-test", "comma-separated model names listed by /v1/models")
	fs.IntVar(&o.Dimension, "dim", 64, "length of /v1/embeddings vectors")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("parse flags: unexpected argument %q", fs.Arg(0))
	}
	if !ValidDist(o.Dist) {
		return fmt.Errorf("parse flags: -dist %q: must be exponential, lognormal or uniform", o.Dist)
	}
	if o.RefuseFirst < 0 {
		return fmt.Errorf("parse flags: -refuse-first %d: must be >= 0", o.RefuseFirst)
	}
	if o.ErrorRate < 0 || o.ErrorRate > 1 {
		return fmt.Errorf("parse flags: -error-rate %v: must be in [0,1]", o.ErrorRate)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"rpm", o.RPM}, {"tpm", o.TPM}, {"itpm", o.ITPM}, {"otpm", o.OTPM}} {
		if f.v < 0 {
			return fmt.Errorf("parse flags: -%s %d: must be >= 0", f.name, f.v)
		}
	}
	if o.Burst <= 0 {
		return fmt.Errorf("parse flags: -burst %s: must be > 0", o.Burst)
	}
	var err error
	if o.Steps, err = ParseSteps(*steps); err != nil {
		return fmt.Errorf("parse flags: -steps %q: %w", *steps, err)
	}
	for _, m := range strings.Split(*models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.Models = append(o.Models, m)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	limits := ""
	if o.limited() {
		limits = fmt.Sprintf(", per minute: %d requests, %d tokens, %d input, %d output (0: no limit)", o.RPM, o.TPM, o.ITPM, o.OTPM)
	}
	fmt.Fprintf(stdout, "breakwater sim: serving a model (OpenAI, Anthropic and Gemini shapes) on http://%s/v1 (capacity %d, latency %s + %s %s jitter%s); stats at /sim/stats\n",
		ln.Addr(), o.Capacity, o.Latency, o.Jitter, o.Dist, limits)
	return Serve(ctx, ln, New(o))
}

// ParseSteps reads capacity changes written as "after:capacity,…", e.g.
// "5s:2,10s:8"; "" means none.
func ParseSteps(v string) ([]Step, error) {
	var out []Step
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		at, capacity, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("parse step %q: want after:capacity", part)
		}
		d, err := time.ParseDuration(at)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("parse step %q: after must be a duration >= 0", part)
		}
		n, err := strconv.Atoi(capacity)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("parse step %q: capacity must be an integer >= 0", part)
		}
		if len(out) > 0 && d <= out[len(out)-1].After {
			return nil, fmt.Errorf("parse step %q: steps must be in increasing order", part)
		}
		out = append(out, Step{After: d, Capacity: n})
	}
	return out, nil
}

// Serve serves h on ln until ctx ends, then shuts down within a second.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Streams still open after a second are cut: the sim holds no state
		// worth draining.
		srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("shutdown: %w", err)
		}
	}
	return nil
}
