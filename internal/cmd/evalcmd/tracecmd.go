package evalcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/embed"
)

// DefaultJudgeAccuracy is the simulated model's accuracy on judge prompts in a replay.
const DefaultJudgeAccuracy = 0.95

// traceFlags are eval's replay flags.
type traceFlags struct {
	trace, fromPairs, writeTrace string
	requests, clusters           int
	seed                         uint64
	threshold, minSimilarity     float64
	candidates, guardSlack       int
	sampleRate, accuracy         float64
	users                        int
	crossUser                    string
	answerTokens                 int
}

func (t *traceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.trace, "trace", "", "replay this JSONL trace ({\"question\",\"answer\"} per line) through the real tiers, static and verified side by side")
	fs.StringVar(&t.fromPairs, "from-pairs", "", "build the trace from this pairs file (union-find clusters, their not-duplicate distractors, Zipf(1.0) popularity) and replay it")
	fs.StringVar(&t.writeTrace, "write-trace", "", "with -from-pairs: also write the built trace to this file")
	fs.IntVar(&t.requests, "requests", 10000, "with -from-pairs: requests in the trace")
	fs.IntVar(&t.clusters, "clusters", 0, "with -from-pairs: paraphrase clusters chosen (each brings its distractors); 0: all")
	fs.Uint64Var(&t.seed, "trace-seed", 1, "seed of the trace, the simulated judge's mistakes and the sampling")
	fs.Float64Var(&t.threshold, "static", decimal32(cache.DefaultThreshold), "static similarity threshold (both modes; the verified mode's fallback)")
	fs.Float64Var(&t.minSimilarity, "min-similarity", verify.DefaultMinSimilarity, "verified mode: lowest similarity judged ([cache.verify] min_similarity)")
	fs.IntVar(&t.candidates, "candidates", verify.DefaultCandidates, "verified mode: candidates judged per lookup ([cache.verify] candidates)")
	fs.IntVar(&t.guardSlack, "guard-slack", verify.DefaultGuardSlack, "verified mode: content words without a counterpart the guard tolerates in a judged candidate")
	fs.Float64Var(&t.sampleRate, "sample-rate", verify.DefaultSampleRate, "share of would-be semantic hits answered fresh for the live estimate ([cache.verify] sample_rate)")
	fs.Float64Var(&t.accuracy, "judge-accuracy", DefaultJudgeAccuracy, "probability that the simulated model's verdict on a judge prompt is right")
	fs.IntVar(&t.answerTokens, "answer-tokens", DefaultAnswerTokens, "output tokens the simulated model reports per answer (what a hit saves beside the question)")
	fs.IntVar(&t.users, "users", 0, "end users the requests are spread over (each request's safety_identifier drawn uniformly, fixed by -trace-seed); 0: no identity (one anonymous user)")
	fs.StringVar(&t.crossUser, "cross-user", cache.DefaultCrossUser, "cache.semantic.cross_user of the replay: agreed, any or never")
}

// decimal32 widens a float32 to the float64 of its shortest decimal form:
// 0.92, not 0.9200000166893005, as a flag default printed by -h.
func decimal32(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

func (t *traceFlags) active() bool { return t.trace != "" || t.fromPairs != "" }

// TraceReport is what eval -trace prints with -json.
type TraceReport struct {
	Requests      int          `json:"requests"`
	Threshold     float64      `json:"static_threshold"`
	MinSimilarity float64      `json:"min_similarity"`
	JudgeAccuracy float64      `json:"judge_accuracy"`
	SampleRate    float64      `json:"sample_rate"`
	Users         int          `json:"users"`
	CrossUser     string       `json:"cross_user"`
	Embedder      string       `json:"embedder"`
	Modes         []ModeReport `json:"modes"`
	// NewWordingRatio is verified / static right answers to new wordings,
	// the comparable count of right semantic hits (ModeReport.NewRight).
	NewWordingRatio Ratio   `json:"new_wording_ratio"`
	Seconds         float64 `json:"seconds"`
}

func runTrace(ctx context.Context, t traceFlags, asJSON bool, stdout, stderr io.Writer, d deps) error {
	if t.trace != "" && t.fromPairs != "" {
		return errors.New("check flags: give -trace or -from-pairs, not both")
	}
	if t.accuracy < 0 || t.accuracy > 1 || t.sampleRate < 0 || t.sampleRate > 1 {
		return fmt.Errorf("check flags: -judge-accuracy and -sample-rate must be in [0, 1]")
	}
	if !cache.ValidCrossUser(t.crossUser) || t.users < 0 {
		return fmt.Errorf("check flags: -cross-user must be %q, %q or %q and -users >= 0", cache.CrossUserAgreed, cache.CrossUserAny, cache.CrossUserNever)
	}
	var trace []TraceLine
	if t.trace != "" {
		f, err := os.Open(t.trace)
		if err != nil {
			return fmt.Errorf("open trace: %w", err)
		}
		trace, err = ReadTrace(f)
		f.Close()
		if err != nil {
			return err
		}
	} else {
		f, err := os.Open(t.fromPairs)
		if err != nil {
			return fmt.Errorf("open pairs: %w", err)
		}
		pairs, err := ReadPairs(f)
		f.Close()
		if err != nil {
			return err
		}
		trace, err = BuildTrace(pairs, TraceOptions{Requests: t.requests, Clusters: t.clusters, Seed: t.seed})
		if err != nil {
			return err
		}
		if t.writeTrace != "" {
			w, err := os.Create(t.writeTrace)
			if err != nil {
				return fmt.Errorf("create trace: %w", err)
			}
			err = WriteTrace(w, trace)
			if cerr := w.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("write trace: %w", cerr)
			}
			if err != nil {
				return err
			}
		}
	}
	if len(trace) == 0 {
		return errors.New("read trace: no requests")
	}
	base, err := d.newEmbedder()
	if err != nil {
		return fmt.Errorf("load embedder: %w", err)
	}
	// Both modes embed the same texts: embed each once.
	emb, err := embed.NewCached(base, 256<<20)
	if err != nil {
		return fmt.Errorf("cache embeddings: %w", err)
	}
	defer emb.Close()
	o := ReplayOptions{
		Threshold: float32(t.threshold), MinSimilarity: float32(t.minSimilarity), Candidates: t.candidates, GuardSlack: t.guardSlack,
		SampleRate: t.sampleRate, JudgeAccuracy: t.accuracy, Seed: t.seed, Users: t.users, CrossUser: t.crossUser, AnswerTokens: t.answerTokens,
		Progress: func(mode string, done, total int) {
			fmt.Fprintf(stderr, "\r%s: %d/%d requests", mode, done, total)
		},
	}
	start := time.Now()
	reps, err := Replay(ctx, trace, emb, func(n int) (cache.Index, error) { return d.newIndex(emb, n) }, o)
	fmt.Fprintln(stderr)
	if err != nil {
		return err
	}
	rep := TraceReport{
		Requests: len(trace), Threshold: t.threshold, MinSimilarity: t.minSimilarity, JudgeAccuracy: t.accuracy,
		SampleRate: t.sampleRate, Users: t.users, CrossUser: t.crossUser, Embedder: emb.Name(), Modes: reps, Seconds: time.Since(start).Seconds(),
		NewWordingRatio: NewWordingRatio(reps[0], reps[1], t.seed),
	}
	if asJSON {
		return writeJSON(stdout, rep)
	}
	return writeReplay(stdout, rep, o)
}
