// Package evalcmd implements `breakwater eval` and `breakwater calibrate`, which measure the semantic tier on labelled question pairs.
package evalcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/embedded"
	"github.com/breakwater-dev/breakwater/cache/guard"
	"github.com/breakwater-dev/breakwater/embed"
)

// deps builds the parts of the semantic tier; tests replace them.
type deps struct {
	newEmbedder func() (embed.Embedder, error)
	newIndex    func(e embed.Embedder, entries int) (cache.Index, error)
}

// defaultDeps is the real tier: the built-in encoder and an in-memory
// embedded index.
var defaultDeps = deps{
	newEmbedder: func() (embed.Embedder, error) {
		b, err := embed.NewBuiltin()
		if err != nil {
			return nil, err
		}
		return b, nil
	},
	newIndex: func(e embed.Embedder, entries int) (cache.Index, error) {
		return embedded.Open(embedded.Options{
			Dimension:    e.Dimension(),
			EmbedderName: e.Name(),
			MaxEntries:   entries + 1,
			SweepEvery:   -1,
		})
	},
}

// common are the flags eval and calibrate share.
type common struct {
	pairs      string
	limit      int
	sample     int
	seed       uint64
	thresholds string
	disable    string
	split      string
	asJSON     bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.pairs, "pairs", "", "labelled pairs, one JSON object per line: {\"a\",\"b\",\"duplicate\"} (required)")
	fs.IntVar(&c.limit, "limit", 0, "use only the first N pairs (0: all)")
	fs.IntVar(&c.sample, "sample", 0, "use a random sample of N pairs, fixed by -seed (0: all)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of -sample")
	fs.StringVar(&c.thresholds, "thresholds", "0.80:0.99:0.01", "thresholds as from:to:step or a comma-separated list")
	fs.StringVar(&c.disable, "disable-rules", "", "comma-separated guard rules to turn off: "+strings.Join(guard.Reasons, ","))
	fs.StringVar(&c.split, "split", SplitAll, "which half of the pairs to use, by a hash of their text: tune, holdout or all (applied before -limit and -sample)")
	fs.BoolVar(&c.asJSON, "json", false, "print machine-readable JSON")
}

// Report is what eval prints with -json.
type Report struct {
	Pairs         int          `json:"pairs"`
	Duplicates    int          `json:"duplicates"`
	NonDuplicates int          `json:"non_duplicates"`
	Skipped       int          `json:"skipped"`
	Split         string       `json:"split"`
	Embedder      string       `json:"embedder"`
	DisabledRules []string     `json:"disabled_rules"`
	WithoutGuard  []Row        `json:"without_guard"`
	WithGuard     []Row        `json:"with_guard"`
	RejectionsAt  float64      `json:"rejections_at"`
	Rejections    []Rejections `json:"rejections"`
	Seconds       float64      `json:"seconds"`
}

// Run implements `breakwater eval`. args excludes the subcommand name.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runEval(ctx, args, stdout, stderr, defaultDeps)
}

// Calibrate implements `breakwater calibrate`. args excludes the subcommand
// name.
func Calibrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runCalibrate(ctx, args, stdout, stderr, defaultDeps)
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs)
	plotPath := fs.String("plot", "", "write a PNG of precision and recall against threshold to this file")
	reasonsAt := fs.Float64("reasons-at", -1, "count guard rejections among pairs scoring at least this (default: the lowest threshold)")
	var tf traceFlags
	tf.register(fs)
	attack := fs.Int("attack", 0, "run the adversarial search instead (issue 42): this many candidate prompts per victim and payload, each pair's best planted end to end through the real proxy; 0: off")
	attackSeed := fs.Uint64("attack-seed", 1, "with -attack: the search's seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *attack > 0 {
		return runAttack(ctx, *attack, *attackSeed, c.asJSON, stdout, stderr, d)
	}
	if tf.active() {
		return runTrace(ctx, tf, c.asJSON, stdout, stderr, d)
	}
	ths, err := ParseThresholds(c.thresholds)
	if err != nil {
		return err
	}
	start := time.Now()
	rep, out, err := measure(ctx, c, d, stderr)
	if err != nil {
		return err
	}
	rep.WithoutGuard = Table(out, ths, false)
	rep.WithGuard = Table(out, ths, true)
	rep.RejectionsAt = ths[0]
	if *reasonsAt >= 0 {
		rep.RejectionsAt = *reasonsAt
	}
	rep.Rejections = RejectionsAt(out, rep.RejectionsAt, append([]string{ReasonUnseen}, guard.Reasons...))
	rep.Seconds = time.Since(start).Seconds()
	if *plotPath != "" {
		if err := writePlot(*plotPath, rep); err != nil {
			return err
		}
	}
	if c.asJSON {
		return writeJSON(stdout, rep)
	}
	return writeText(stdout, rep)
}

func runCalibrate(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) error {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs)
	target := fs.Float64("max-false-hit", 0.05, "largest acceptable false-hit rate (share of hits that are not duplicates), as a 95 % upper bound")
	useGuard := fs.Bool("guard", true, "count only hits the guard accepts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target <= 0 || *target >= 1 {
		return fmt.Errorf("check -max-false-hit: %v is outside (0, 1)", *target)
	}
	ths, err := ParseThresholds(c.thresholds)
	if err != nil {
		return err
	}
	rep, out, err := measure(ctx, c, d, stderr)
	if err != nil {
		return err
	}
	rows := Table(out, ths, *useGuard)
	row, found := PickThreshold(rows, *target)
	cal := Calibration{Target: *target, Guard: *useGuard, Found: found, Row: row}
	if c.asJSON {
		if err := writeJSON(stdout, cal); err != nil {
			return err
		}
	} else {
		writeCalibration(stdout, cal, rep)
	}
	if !found {
		return fmt.Errorf("calibrate threshold: no threshold in %s keeps the false-hit rate under %v with 95 %% confidence", c.thresholds, *target)
	}
	return nil
}

// measure loads the pairs and runs them through the tier.
func measure(ctx context.Context, c common, d deps, stderr io.Writer) (Report, []Outcome, error) {
	var rep Report
	if c.pairs == "" {
		return rep, nil, errors.New("check flags: -pairs is required")
	}
	if c.split == "" {
		c.split = SplitAll
	}
	if !slices.Contains(Splits, c.split) {
		return rep, nil, fmt.Errorf("check -split: unknown half %q (want one of %s)", c.split, strings.Join(Splits, ","))
	}
	f, err := os.Open(c.pairs)
	if err != nil {
		return rep, nil, fmt.Errorf("open pairs: %w", err)
	}
	pairs, err := ReadPairs(f)
	f.Close()
	if err != nil {
		return rep, nil, err
	}
	pairs = SplitPairs(pairs, c.split)
	if c.limit > 0 && c.limit < len(pairs) {
		pairs = pairs[:c.limit]
	}
	pairs = Sample(pairs, c.sample, c.seed)
	if len(pairs) == 0 {
		return rep, nil, fmt.Errorf("read pairs: %s has no pairs (split %s)", c.pairs, c.split)
	}
	opts, disabled, err := guardOptions(c.disable)
	if err != nil {
		return rep, nil, err
	}
	emb, err := d.newEmbedder()
	if err != nil {
		return rep, nil, fmt.Errorf("load embedder: %w", err)
	}
	idx, err := d.newIndex(emb, len(pairs))
	if err != nil {
		return rep, nil, fmt.Errorf("open index: %w", err)
	}
	defer idx.Close()
	bar := newProgressBar(stderr)
	out, skipped, err := Measure(ctx, pairs, emb, idx, guard.New(opts).Check, bar.update)
	bar.done()
	if err != nil {
		return rep, nil, err
	}
	rep.Pairs = len(out)
	rep.Skipped = skipped
	rep.Split = c.split
	rep.Embedder = emb.Name()
	rep.DisabledRules = disabled
	for _, o := range out {
		if o.Duplicate {
			rep.Duplicates++
		} else {
			rep.NonDuplicates++
		}
	}
	return rep, out, nil
}

// guardOptions turns "-disable-rules content,name" into guard options.
func guardOptions(list string) (guard.Options, []string, error) {
	var o guard.Options
	// The switch of each rule by its reason (number and year are one rule).
	off := map[string]*bool{
		guard.ReasonQuoted: &o.NoQuoted, guard.ReasonIdentifier: &o.NoIdentifiers,
		guard.ReasonNumber: &o.NoNumbers, guard.ReasonYear: &o.NoNumbers,
		guard.ReasonComparison: &o.NoComparisons, guard.ReasonDate: &o.NoDates,
		guard.ReasonNegation: &o.NoNegation, guard.ReasonOpposite: &o.NoOpposites,
		guard.ReasonName: &o.NoNames, guard.ReasonQuestion: &o.NoQuestion,
		guard.ReasonOrder: &o.NoOrder, guard.ReasonDirective: &o.NoDirectives,
		guard.ReasonContent: &o.NoContent,
	}
	disabled := []string{}
	for _, r := range strings.Split(list, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		flag, ok := off[r]
		if !ok {
			return o, nil, fmt.Errorf("check -disable-rules: unknown rule %q (want one of %s)", r, strings.Join(guard.Reasons, ","))
		}
		*flag = true
		if !slices.Contains(disabled, r) {
			disabled = append(disabled, r)
		}
	}
	return o, disabled, nil
}
