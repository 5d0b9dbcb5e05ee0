package flow

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// OutcomeMissSampled marks a would-be semantic hit answered fresh to measure
// the live false-hit rate (Options.Verify).
const OutcomeMissSampled = "miss-sampled"

// busyCaller is implemented by a Caller that can tell whether a model's
// targets are queueing, rate limited or behind a breaker that is not closed.
type busyCaller interface {
	Busy(model, upstreamName string) bool
}

// The caller the app wires must keep implementing it: a changed signature
// would otherwise turn the check off silently.
var _ busyCaller = (*upstream.Caller)(nil)

// Verify configures the live false-hit estimate: a share of would-be
// semantic hits is answered fresh and compared with the cached answer, and
// the fresh answer of every miss that had a near candidate is compared with
// the candidate's.
type Verify struct {
	// Rate is the share of would-be semantic hits answered fresh, in [0, 1].
	// Zero samples none (near misses are still compared).
	Rate float64
	// Estimator keeps the counts. Required.
	Estimator *verify.Estimator
	// Judge reports the judge's counters in /stats; nil reports none.
	Judge interface{ Stats() verify.JudgeStats }
	// Compare decides whether two answer texts are the same answer. Nil:
	// normalised text equality.
	Compare func(ctx context.Context, a, b string) bool
	// Rand returns a number in [0, 1). Nil: math/rand/v2.
	Rand func() float64
	// Auto puts semantic candidates to the model of the request's own
	// route (verify.Auto): each lookup carries the request as the judge's
	// verify.Asker.
	Auto bool
	// JudgeModel names the model the auto judge asks for a requested model
	// (a route's judge_model); "" or nil: the requested model.
	JudgeModel func(model string) string

	once  sync.Once
	slots chan struct{}
}

// VerifyStats is the "verify" section of /stats.
type VerifyStats struct {
	SampleRate float64            `json:"sample_rate"`
	Judge      *verify.JudgeStats `json:"judge,omitempty"`
	verify.EstimateStats
}

// probe is what the estimate needs to know about one request.
type probe struct {
	sampled bool   // a would-be semantic hit sent upstream instead
	cached  []byte // the body it would have been served, or the near candidate's
}

// sampleHit decides whether a would-be semantic hit is answered fresh
// instead (streamed or not: a stream's fresh answer is compared once it has
// ended whole). A busy target skips (and counts) the sample, because a fresh
// answer would add load where it hurts.
func (s *Flow) sampleHit(x *exchange, res cache.Result) bool {
	v := s.opts.Verify
	if v == nil || v.Rate <= 0 || x.ctl.noStore {
		return false
	}
	r := rand.Float64
	if v.Rand != nil {
		r = v.Rand
	}
	if r() >= v.Rate {
		return false
	}
	if s.targetBusy(x.shape.Model, x.home) {
		v.Estimator.Skip(verify.SkipBusy)
		return false
	}
	x.probe = &probe{sampled: true, cached: res.Entry.Body}
	return true
}

// noteNear remembers a miss's near candidate, to compare with the fresh answer.
func (s *Flow) noteNear(x *exchange, res cache.Result) {
	if s.opts.Verify != nil && res.Near != nil {
		x.probe = &probe{cached: res.Near.Entry.Body}
	}
}

// missOutcome names a miss: sampled hits are told apart in
// X-Breakwater-Cache, /stats and metrics.
func (s *Flow) missOutcome(x *exchange) string {
	if x.probe != nil && x.probe.sampled {
		return OutcomeMissSampled
	}
	return OutcomeMiss
}

// checkFresh compares a fresh answer with the cached one it was sampled
// against, or with the near candidate's.
func (s *Flow) checkFresh(x *exchange, resp *upstream.Response) {
	if x.probe == nil || resp.Status != http.StatusOK {
		return
	}
	s.compareFresh(context.WithoutCancel(x.req.Context()), x.format, x.probe, resp.Body)
}

// compareFresh compares a fresh answer body of format f with the cached
// answer of p and counts the outcome.
func (s *Flow) compareFresh(ctx context.Context, f Format, p *probe, body []byte) {
	v := s.opts.Verify
	if v == nil {
		return
	}
	cached, fresh := f.AnswerText(p.cached), f.AnswerText(body)
	if p.sampled {
		// Rare (a share of the semantic hits) and the estimate itself:
		// compared at once (before a JSON answer goes out).
		v.Estimator.Sample(s.sameAnswer(ctx, cached, fresh))
		return
	}
	// Near misses are common; their comparison (two embeddings when the
	// texts differ) runs beside the response, on a few bounded slots, and
	// is dropped when they are all taken.
	select {
	case s.nearSlots() <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-s.nearSlots() }()
		v.Estimator.NearMiss(s.sameAnswer(ctx, cached, fresh))
	}()
}

// nearCompareSlots bounds near-miss comparisons in flight.
const nearCompareSlots = 4

func (s *Flow) nearSlots() chan struct{} {
	v := s.opts.Verify
	v.once.Do(func() { v.slots = make(chan struct{}, nearCompareSlots) })
	return v.slots
}

func (s *Flow) sameAnswer(ctx context.Context, a, b string) bool {
	if s.opts.Verify != nil && s.opts.Verify.Compare != nil {
		return s.opts.Verify.Compare(ctx, a, b)
	}
	var c verify.Comparer
	return c.Same(ctx, a, b)
}

// targetBusy asks the caller whether model's targets are under pressure; a
// caller without Busy is judged from its snapshot: a queue or a breaker
// that is not closed.
func (s *Flow) targetBusy(model, upstreamName string) bool {
	if b, ok := s.opts.Caller.(busyCaller); ok {
		return b.Busy(model, upstreamName)
	}
	snap := s.opts.Caller.Snapshot()
	var found *upstream.ModelStats
	for i := range snap {
		if snap[i].Name == model || (found == nil && snap[i].Name == upstream.DefaultModelName) {
			found = &snap[i]
		}
	}
	if found == nil {
		return false
	}
	for _, t := range found.Targets {
		if t.Queued > 0 || t.State != "closed" {
			return true
		}
	}
	return false
}

// Stats is the "verify" section of /stats; nil without a Verify.
func (v *Verify) Stats() *VerifyStats {
	if v == nil {
		return nil
	}
	st := &VerifyStats{SampleRate: v.Rate, EstimateStats: v.Estimator.Stats()}
	if v.Judge != nil {
		j := v.Judge.Stats()
		st.Judge = &j
	}
	return st
}
