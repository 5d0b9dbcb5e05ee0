package verify

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/breakwater-dev/breakwater/cache"
)

// Defaults of the live false-hit estimate.
const (
	// DefaultSampleRate is the share of would-be semantic hits answered
	// fresh to check them: 2 % of the hits costs 2 % of their upstream calls.
	// Each sampled client gets a fresh answer instead of the hit it would
	// have had, so the default stays small; an operator who wants a
	// narrower interval sooner raises it.
	DefaultSampleRate = 0.02
	// DefaultAnswerSimilarity is the built-in encoder's cosine similarity at
	// or above which two answers that are not equal as text count as the
	// same answer (and the guard must accept them as a pair too).
	DefaultAnswerSimilarity = 0.95
)

// SkipBusy is the reason a sample is skipped while the target is queueing,
// rate limited or its breaker is not closed.
const SkipBusy = "busy"

// Interval is a proportion with its 95 % Wilson score interval.
type Interval struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// z is the standard normal quantile for a two-sided 95 % interval.
const z = 1.959963984540054

// Wilson returns k/n with its 95 % Wilson score interval, which stays
// inside [0, 1] and keeps its coverage at k = 0 and for small n, where the
// normal approximation does not. n = 0 gives 0 within [0, 1].
func Wilson(k, n uint64) Interval {
	if n == 0 {
		return Interval{Low: 0, High: 1}
	}
	p := float64(k) / float64(n)
	nn := float64(n)
	den := 1 + z*z/nn
	center := (p + z*z/(2*nn)) / den
	half := z * math.Sqrt(p*(1-p)/nn+z*z/(4*nn*nn)) / den
	return Interval{Value: p, Low: max(0, center-half), High: min(1, center+half)}
}

// EstimatePoint is the estimate at the end of one minute.
type EstimatePoint struct {
	Time         time.Time `json:"time"`
	Samples      uint64    `json:"samples"`
	FalseHitRate Interval  `json:"false_hit_rate"`
}

// timelineLen bounds the estimate's timeline (minutes).
const timelineLen = 120

// Estimator counts sampled semantic hits whose fresh answer differed from
// the cached one. Because the samples are drawn uniformly from the
// would-be hits, mismatches/samples is an unbiased estimate of the share
// of wrong answers among the semantic hits served. Safe for concurrent use.
type Estimator struct {
	mu                        sync.Mutex
	samples, mismatches       uint64
	skipped                   map[string]uint64
	nearMatched, nearDiffered uint64
	timeline                  []EstimatePoint
	metrics                   *Metrics
	now                       func() time.Time
}

// NewEstimator returns an empty Estimator. m may be nil; now nil is
// time.Now.
func NewEstimator(m *Metrics, now func() time.Time) *Estimator {
	if now == nil {
		now = time.Now
	}
	return &Estimator{skipped: map[string]uint64{}, metrics: m, now: now}
}

// Sample records one sampled hit: match says whether the fresh answer was
// the cached one.
func (e *Estimator) Sample(match bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.samples++
	if !match {
		e.mismatches++
	}
	iv := Wilson(e.mismatches, e.samples)
	minute := e.now().Truncate(time.Minute)
	if n := len(e.timeline); n > 0 && e.timeline[n-1].Time.Equal(minute) {
		e.timeline[n-1] = EstimatePoint{Time: minute, Samples: e.samples, FalseHitRate: iv}
	} else {
		if n == timelineLen {
			e.timeline = append(e.timeline[:0], e.timeline[1:]...)
		}
		e.timeline = append(e.timeline, EstimatePoint{Time: minute, Samples: e.samples, FalseHitRate: iv})
	}
	if m := e.metrics; m != nil {
		if match {
			m.samples.WithLabelValues("match").Inc()
		} else {
			m.samples.WithLabelValues("mismatch").Inc()
		}
		m.rate.WithLabelValues("estimate").Set(iv.Value)
		m.rate.WithLabelValues("low").Set(iv.Low)
		m.rate.WithLabelValues("high").Set(iv.High)
	}
}

// Skip records a sample not taken, by reason.
func (e *Estimator) Skip(reason string) {
	e.mu.Lock()
	e.skipped[reason]++
	e.mu.Unlock()
	if e.metrics != nil {
		e.metrics.skipped.WithLabelValues(reason).Inc()
	}
}

// NearMiss records a miss that had a near candidate: matched says whether
// the fresh answer was the candidate's stored answer (a paraphrase the
// cache missed).
func (e *Estimator) NearMiss(matched bool) {
	e.mu.Lock()
	if matched {
		e.nearMatched++
	} else {
		e.nearDiffered++
	}
	e.mu.Unlock()
	if e.metrics != nil {
		if matched {
			e.metrics.near.WithLabelValues("matched").Inc()
		} else {
			e.metrics.near.WithLabelValues("differed").Inc()
		}
	}
}

// EstimateStats are the live estimate's figures.
type EstimateStats struct {
	// Samples are would-be semantic hits answered fresh; Mismatches are those
	// whose fresh answer differed from the cached one.
	Samples    uint64 `json:"samples"`
	Mismatches uint64 `json:"mismatches"`
	// Skipped counts samples not taken, by reason.
	Skipped map[string]uint64 `json:"samples_skipped"`
	// FalseHitRate = Mismatches / Samples with its 95 % Wilson interval.
	FalseHitRate Interval `json:"false_hit_rate"`
	// NearMissesMatched are misses whose fresh answer equalled a near
	// candidate's answer: paraphrases the cache did not serve.
	NearMissesMatched  uint64 `json:"near_misses_matched"`
	NearMissesDiffered uint64 `json:"near_misses_differed"`
	// Timeline is the estimate at the end of each minute with samples,
	// oldest first (at most two hours).
	Timeline []EstimatePoint `json:"timeline"`
}

// Stats returns the estimate.
func (e *Estimator) Stats() EstimateStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := EstimateStats{
		Samples: e.samples, Mismatches: e.mismatches, Skipped: map[string]uint64{},
		FalseHitRate:      Wilson(e.mismatches, e.samples),
		NearMissesMatched: e.nearMatched, NearMissesDiffered: e.nearDiffered,
		Timeline: append([]EstimatePoint{}, e.timeline...),
	}
	for k, n := range e.skipped {
		s.Skipped[k] = n
	}
	return s
}

// Comparer decides whether two answers are the same answer.
type Comparer struct {
	// Embedder embeds answers for the similarity test. Nil: text equality
	// only.
	Embedder cache.Embedder
	// MinSimilarity is the cosine similarity at or above which two unequal
	// answers are the same. Zero: DefaultAnswerSimilarity; 1 or more: text
	// equality only.
	MinSimilarity float32
	// Guard, when set, must accept the pair too: an encoder scores "42 km"
	// and "24 km" alike, the guard does not.
	Guard func(a, b string) (bool, string)
}

// Same reports whether answers a and b are the same: equal after
// normalisation (case, spacing, punctuation at the ends), or similar
// enough by the encoder and accepted by the guard.
func (c *Comparer) Same(ctx context.Context, a, b string) bool {
	na, nb := normalise(a), normalise(b)
	if na == nb {
		return true
	}
	th := c.MinSimilarity
	if th == 0 {
		th = DefaultAnswerSimilarity
	}
	if c.Embedder == nil || th >= 1 || na == "" || nb == "" {
		return false
	}
	if c.Guard != nil {
		if ok, _ := c.Guard(a, b); !ok {
			return false
		}
	}
	vecs, err := c.Embedder.Embed(ctx, []string{a, b})
	if err != nil || len(vecs) != 2 || len(vecs[0]) != len(vecs[1]) {
		return false
	}
	var dot float32
	for i := range vecs[0] {
		dot += vecs[0][i] * vecs[1][i]
	}
	return dot >= th
}

func normalise(s string) string {
	s = strings.Join(strings.Fields(strings.ToLower(s)), " ")
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
}

// AnswerText is the text of an OpenAI completion body: the first choice's
// message content, or its text for the legacy completions API. Other wire
// APIs read their own answers (the proxy's Format.AnswerText).
func AnswerText(body []byte) string {
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			Text string `json:"text"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &c) != nil || len(c.Choices) == 0 {
		return ""
	}
	if c.Choices[0].Message.Content != "" {
		return c.Choices[0].Message.Content
	}
	return c.Choices[0].Text
}
