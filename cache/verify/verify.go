// Package verify asks a judge (a reranker or a small chat model) whether a semantic candidate answers the new question, and estimates the live false-hit rate.
package verify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/breakwater-dev/breakwater/cache"
)

// Judge names accepted by the configuration.
const (
	JudgeNone   = "none"
	JudgeRerank = "rerank"
	JudgeLLM    = "llm"
)

// What a lookup does with a candidate the judge could not rule on
// (Options.NoVerdictMiss; [cache.verify] no_verdict).
const (
	NoVerdictMiss      = "miss"
	NoVerdictThreshold = "threshold"
)

// Defaults for zero Options fields.
const (
	// DefaultMinSimilarity is the lowest cosine similarity a candidate needs
	// to be put to the judge: the lowest threshold docs/PRECISION.md
	// measures for the built-in encoder.
	DefaultMinSimilarity = 0.80
	// DefaultCandidates is how many guarded candidates, best first, one
	// lookup puts to the judge. Each wrong candidate judged is one more
	// chance of a false accept (1-(1-e)^k for a judge wrong a share e of the
	// time), while the right answer is nearly always the best guarded
	// candidate: on the replayed trace, judging 2 or 3 raised the wrong
	// share from 2.8 % to 4.1 % for 2 % more right hits (docs/PRECISION.md).
	DefaultCandidates = 1
	// DefaultGuardSlack is how many content words without a counterpart the
	// guard tolerates in a candidate that is put to a judge
	// (guard.Options.MaxUnmatched). The content rule stands in for a reading
	// of the wording, which the judge gives; the rules on answer-determining
	// tokens (numbers, dates, names, negation, order) stay strict, and a
	// candidate served without a verdict must pass the strict guard.
	DefaultGuardSlack = 1
	// DefaultTimeout bounds one judge call. A cross-encoder scores a few
	// short pairs in tens of milliseconds; a chat model (auto, llm) answers
	// a few tokens after its time to a first token, a few hundred
	// milliseconds on hosted models. Past this the candidate has no verdict.
	DefaultTimeout = 2 * time.Second
	// DefaultConcurrency bounds judge calls in flight.
	DefaultConcurrency = 16
	// DefaultSlotWait is how long a lookup waits for a free judge slot
	// before it falls back to the static threshold: long enough to ride out
	// a burst of lookups, short next to an upstream call.
	DefaultSlotWait = 100 * time.Millisecond
	// DefaultVerdicts bounds the verdict cache (entries).
	DefaultVerdicts = 1 << 16
	// DefaultMinScore accepts a reranker's relevance score at or above it.
	// Cross-encoder rerankers (bge-reranker, jina-reranker, Cohere rerank)
	// return a sigmoid probability, so 0.5 is "more likely than not".
	DefaultMinScore = 0.5
	// DefaultRerankModel is sent when no model is configured.
	DefaultRerankModel = "BAAI/bge-reranker-v2-m3"
)

// Fallback reasons, a metric label and a /stats key.
const (
	FallbackBusy    = "busy"
	FallbackTimeout = "timeout"
	FallbackError   = "error"
)

// Judge decides, for each candidate question, whether its answer also
// answers query. It returns one verdict per candidate, in order.
type Judge interface {
	Judge(ctx context.Context, query string, candidates []string) ([]bool, error)
	Name() string
}

// Options configure a Verifier. Every zero value is usable. MinSimilarity,
// Candidates, Timeout and Concurrency are also the configuration file's
// [cache.verify] keys (the toml tags; zero:"refused": the file's 0 reaches
// Validate as a negative value, which it refuses).
type Options struct {
	// Judge gives verdicts. Nil: no judge; Verify never gives a verdict and
	// the cache keeps its static threshold.
	Judge Judge
	// MinSimilarity is the lowest cosine similarity a candidate needs to be
	// judged, in (0, 1]. Default 0.80 (DefaultMinSimilarity).
	MinSimilarity float32 `toml:"min_similarity" zero:"refused"`
	// Candidates is how many guarded candidates one lookup may judge.
	// Default 1 (DefaultCandidates). Must be >= 1.
	Candidates int `toml:"candidates" zero:"refused"`
	// Timeout bounds one judge call; past it the candidate has no verdict
	// (see NoVerdictMiss). Default 2s (DefaultTimeout).
	Timeout time.Duration `toml:"timeout" zero:"refused"`
	// Concurrency bounds judge calls in flight; a lookup that finds no free
	// slot within SlotWait (100ms) falls back. Default 16
	// (DefaultConcurrency). Must be >= 1.
	Concurrency int `toml:"concurrency" zero:"refused"`
	// SlotWait is how long a lookup waits for a free slot before falling
	// back. Zero: DefaultSlotWait; negative: no wait.
	SlotWait time.Duration
	// Verdicts bounds the verdict cache. Zero: DefaultVerdicts.
	Verdicts int
	// Busy reports pressure (e.g. the chat model a judge calls is queueing);
	// while it is true lookups fall back instead of calling. Nil: never.
	Busy func() bool
	// Metrics records Prometheus metrics. Nil: none.
	Metrics *Metrics
	// Strict is the strict guard's verdict on a pair (true: accepted). A
	// candidate the judge accepts that Strict refuses is put to the judge a
	// second time, the questions swapped, and served only when both
	// verdicts say so. Nil: one verdict decides.
	Strict func(query, candidate string) bool
	// NoVerdictMiss makes a candidate the judge could not rule on (busy,
	// slow, refused, unparsable) a miss, as the auto judge's default is;
	// false leaves the decision to the static threshold and the strict guard.
	NoVerdictMiss bool
}

// Verifier puts semantic candidates to a judge within bounds: a timeout, a
// concurrency limit, a verdict cache and a counted fallback to the static
// threshold. It implements cache.Verifier and is safe for concurrent use.
type Verifier struct {
	judge    Judge
	floor    float32
	limit    int
	timeout  time.Duration
	slots    chan struct{}
	slotWait time.Duration
	busy     func() bool
	miss     bool // no verdict: a miss
	strict   func(query, candidate string) bool
	metrics  *Metrics
	verdicts *ristretto.Cache[uint64, bool]

	calls, accepts, rejects, cached atomic.Uint64
	seconds                         atomic.Uint64 // second opinions asked
	latencyNanos                    atomic.Int64
	fbMu                            sync.Mutex
	fallbacks                       map[string]uint64
}

// New returns a Verifier; Close releases its verdict cache.
func New(o Options) (*Verifier, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("new verifier: %w", err)
	}
	v := &Verifier{
		judge: o.Judge, floor: o.MinSimilarity, limit: o.Candidates, timeout: o.Timeout,
		busy: o.Busy, miss: o.NoVerdictMiss, strict: o.Strict, metrics: o.Metrics, fallbacks: map[string]uint64{}, slotWait: o.SlotWait,
	}
	if v.slotWait == 0 {
		v.slotWait = DefaultSlotWait
	}
	if v.floor <= 0 {
		v.floor = DefaultMinSimilarity
	}
	if v.limit <= 0 {
		v.limit = DefaultCandidates
	}
	if v.timeout <= 0 {
		v.timeout = DefaultTimeout
	}
	n := o.Concurrency
	if n <= 0 {
		n = DefaultConcurrency
	}
	v.slots = make(chan struct{}, n)
	size := o.Verdicts
	if size <= 0 {
		size = DefaultVerdicts
	}
	c, err := ristretto.NewCache(&ristretto.Config[uint64, bool]{
		NumCounters: int64(size) * 10, MaxCost: int64(size), BufferItems: 64,
	})
	if err != nil {
		return nil, fmt.Errorf("create verdict cache: %w", err)
	}
	v.verdicts = c
	return v, nil
}

// Close releases the verdict cache.
func (v *Verifier) Close() { v.verdicts.Close() }

// Floor is the lowest similarity a candidate needs to be considered.
func (v *Verifier) Floor() float32 { return v.floor }

// Limit is how many candidates one lookup may judge.
func (v *Verifier) Limit() int { return v.limit }

// Enabled reports whether a judge is configured.
func (v *Verifier) Enabled() bool { return v.judge != nil }

// JudgeName is the judge's name, or JudgeNone.
func (v *Verifier) JudgeName() string {
	if v.judge == nil {
		return JudgeNone
	}
	return v.judge.Name()
}

// verdictKey identifies (partition, question, entry): a verdict is reused
// only by the tenant whose lookup produced it.
func verdictKey(partition, query string, e *cache.Entry) uint64 {
	h := sha256.New()
	for _, s := range []string{partition, query, e.Key, e.Query} {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return binary.LittleEndian.Uint64(h.Sum(nil))
}

// Verify returns one verdict per candidate (true: serve it), or ok = false
// when there is no verdict (no judge, or it is busy, slow or failing; every
// such fallback is counted) and the static threshold decides. With
// Options.NoVerdictMiss a judge that cannot rule rejects every candidate
// instead (counted as a fallback all the same), and nothing is remembered.
func (v *Verifier) Verify(ctx context.Context, partition, query string, cands []cache.Entry) ([]bool, bool) {
	if v.judge == nil || len(cands) == 0 {
		return nil, false
	}
	out, ok := v.verify(ctx, partition, query, cands)
	if !ok && v.miss {
		return make([]bool, len(cands)), true
	}
	return out, ok
}

func (v *Verifier) verify(ctx context.Context, partition, query string, cands []cache.Entry) ([]bool, bool) {
	out := make([]bool, len(cands))
	keys := make([]uint64, len(cands))
	var ask []int
	for i := range cands {
		keys[i] = verdictKey(partition, query, &cands[i])
		if ok, found := v.verdicts.Get(keys[i]); found {
			out[i] = ok
			v.cached.Add(1)
			if v.metrics != nil {
				v.metrics.cached.Inc()
			}
			continue
		}
		ask = append(ask, i)
	}
	if len(ask) == 0 {
		return out, true
	}
	if v.busy != nil && v.busy() {
		v.fallback(FallbackBusy)
		return nil, false
	}
	if !v.acquire(ctx) {
		v.fallback(FallbackBusy)
		return nil, false
	}
	defer func() { <-v.slots }()
	texts := make([]string, len(ask))
	for j, i := range ask {
		texts[j] = cands[i].Query
	}
	cctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	start := time.Now()
	got, err := v.judge.Judge(cctx, query, texts)
	if err == nil && len(got) == len(ask) {
		err = v.secondOpinion(cctx, query, texts, got)
	}
	took := time.Since(start)
	v.calls.Add(1)
	v.latencyNanos.Add(int64(took))
	if v.metrics != nil {
		v.metrics.calls.Inc()
		v.metrics.latency.Observe(took.Seconds())
	}
	if err == nil && len(got) != len(ask) {
		err = fmt.Errorf("judge returned %d verdicts for %d candidates", len(got), len(ask))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, false // the client went away: no judge fault
		}
		if errors.Is(err, context.DeadlineExceeded) || cctx.Err() != nil {
			v.fallback(FallbackTimeout)
		} else {
			v.fallback(FallbackError)
		}
		return nil, false
	}
	for j, i := range ask {
		out[i] = got[j]
		v.verdicts.Set(keys[i], got[j], 1)
		if got[j] {
			v.accepts.Add(1)
		} else {
			v.rejects.Add(1)
		}
		if v.metrics != nil {
			v.metrics.verdict(got[j])
		}
	}
	v.verdicts.Wait()
	return out, true
}

// secondOpinion asks the judge again, with the two questions in the other
// order, about each candidate it accepted that the strict guard refuses
// (Options.Strict: only the judged guard's slack let it through), and keeps
// the acceptance only when both verdicts agree. Chat models judging a pair
// favour one position (Zheng et al., "Judging LLM-as-a-Judge", NeurIPS 2023,
// §3.3: swap the order and count only consistent verdicts); the candidates
// the strict guard refuses are where a wrong "same" is likeliest.
func (v *Verifier) secondOpinion(ctx context.Context, query string, texts []string, got []bool) error {
	if v.strict == nil {
		return nil
	}
	for j, ok := range got {
		if !ok || v.strict(query, texts[j]) {
			continue
		}
		again, err := v.judge.Judge(ctx, texts[j], []string{query})
		if err == nil && len(again) != 1 {
			err = fmt.Errorf("judge returned %d verdicts for 1 candidate", len(again))
		}
		if err != nil {
			return err
		}
		v.seconds.Add(1)
		got[j] = again[0]
	}
	return nil
}

// acquire takes a judge slot, waiting at most slotWait.
func (v *Verifier) acquire(ctx context.Context) bool {
	select {
	case v.slots <- struct{}{}:
		return true
	default:
	}
	if v.slotWait <= 0 {
		return false
	}
	t := time.NewTimer(v.slotWait)
	defer t.Stop()
	select {
	case v.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (v *Verifier) fallback(reason string) {
	v.fbMu.Lock()
	v.fallbacks[reason]++
	v.fbMu.Unlock()
	if v.metrics != nil {
		v.metrics.fallbacks.WithLabelValues(reason).Inc()
	}
}

// JudgeStats are the judge's counters, the "judge" part of /stats "verify".
type JudgeStats struct {
	Judge string `json:"judge"`
	// Calls counts judge calls (one per lookup that needed verdicts).
	Calls uint64 `json:"calls"`
	// Accepts and Rejects count verdicts on candidates.
	Accepts uint64 `json:"accepts"`
	Rejects uint64 `json:"rejects"`
	// SecondOpinions counts candidates asked about a second time, the
	// questions swapped (Options.Strict): each one more call to a chat judge.
	SecondOpinions uint64 `json:"second_opinions"`
	// CachedVerdicts counts verdicts reused from the verdict cache.
	CachedVerdicts uint64 `json:"cached_verdicts"`
	// Fallbacks counts lookups decided by the static threshold because the
	// judge was busy, slow or failing, by reason.
	Fallbacks      map[string]uint64 `json:"fallbacks"`
	FallbacksTotal uint64            `json:"fallbacks_total"`
	// MeanLatencyMS is the mean duration of a judge call.
	MeanLatencyMS float64 `json:"mean_latency_ms"`
}

// Stats returns the judge's counters.
func (v *Verifier) Stats() JudgeStats {
	s := JudgeStats{
		Judge: v.JudgeName(), Calls: v.calls.Load(), Accepts: v.accepts.Load(),
		Rejects: v.rejects.Load(), SecondOpinions: v.seconds.Load(), CachedVerdicts: v.cached.Load(), Fallbacks: map[string]uint64{},
	}
	v.fbMu.Lock()
	for k, n := range v.fallbacks {
		s.Fallbacks[k] = n
		s.FallbacksTotal += n
	}
	v.fbMu.Unlock()
	if s.Calls > 0 {
		s.MeanLatencyMS = float64(v.latencyNanos.Load()) / float64(s.Calls) / 1e6
	}
	return s
}
