package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// busyCallerStub adds Busy to a Caller, as *upstream.Caller does when the
// target is queueing, rate limited or its breaker is not closed.
type busyCallerStub struct {
	Caller
	busy bool
}

func (b busyCallerStub) Busy(string, string) bool { return b.busy }

const (
	qStored = "what is the capital of france"
	qPara   = "what is the capital of france today" // bag cosine 0.93
	qNear   = "what is the capital of spain"        // bag cosine 0.83
)

// sameAnswerModel answers every question with the same text, so a fresh
// answer always matches the cached one.
func sameAnswerModel(e *env) {
	e.model.HandleFunc = func(w http.ResponseWriter, _ *http.Request, body map[string]any) bool {
		if s, _ := body["stream"].(bool); s {
			streamAnswer(w, body, "Paris.", 0)
			return true
		}
		writeJSON(w, 200, completion(body, "Paris."))
		return true
	}
}

// verifyEnv is an env with the estimate on and qStored answered and
// indexed; constant makes the model answer every question alike.
func verifyEnv(t *testing.T, rate float64, constant bool, mod func(*envOptions)) (*env, *verify.Estimator) {
	t.Helper()
	est := verify.NewEstimator(nil, nil)
	eo := envOptions{proxy: func(o *Options) { o.Verify = &Verify{Rate: rate, Estimator: est} }}
	if mod != nil {
		mod(&eo)
	}
	e := newEnv(t, eo)
	if constant {
		sameAnswerModel(e)
	}
	if r := e.post("/v1/chat/completions", chat(qStored)); r.header.Get(HeaderCache) != OutcomeMiss {
		t.Fatalf("first request: %s", r.header.Get(HeaderCache))
	}
	e.waitIndexed(1)
	return e, est
}

func TestSampledHitIsAnsweredFresh(t *testing.T) {
	e, est := verifyEnv(t, 1, false, nil)
	calls := e.model.calls.Load()
	r := e.post("/v1/chat/completions", chat(qPara))
	if got := r.header.Get(HeaderCache); got != OutcomeMissSampled {
		t.Fatalf("X-Breakwater-Cache = %q, want %q", got, OutcomeMissSampled)
	}
	if got, want := r.content(t), "answer to: "+qPara; got != want {
		t.Errorf("client got %q, want the fresh answer %q", got, want)
	}
	if got := e.model.calls.Load() - calls; got != 1 {
		t.Errorf("upstream calls = %d, want 1", got)
	}
	// The fake model answers each wording differently: the cached answer
	// was wrong for this question.
	st := est.Stats()
	if st.Samples != 1 || st.Mismatches != 1 {
		t.Errorf("estimate = %+v, want one sample, one mismatch", st)
	}
	var body struct {
		Verify *VerifyStats `json:"verify"`
	}
	if err := json.Unmarshal(e.get("/stats").body, &body); err != nil || body.Verify == nil {
		t.Fatalf("/stats verify section missing: %v", err)
	}
	if got := body.Verify.FalseHitRate; got.Value != 1 || got.Low <= 0 || got.High != 1 {
		t.Errorf("/stats false_hit_rate = %+v, want 1 with its interval", got)
	}
}

func TestSampledHitThatMatches(t *testing.T) {
	e, est := verifyEnv(t, 1, true, nil)
	if r := e.post("/v1/chat/completions", chat(qPara)); r.header.Get(HeaderCache) != OutcomeMissSampled {
		t.Fatalf("X-Breakwater-Cache = %q", r.header.Get(HeaderCache))
	}
	if st := est.Stats(); st.Samples != 1 || st.Mismatches != 0 {
		t.Errorf("estimate = %+v, want one matching sample", st)
	}
}

func TestSamplingSkippedUnderPressure(t *testing.T) {
	e, est := verifyEnv(t, 1, false, func(eo *envOptions) {
		inner := eo.proxy
		eo.proxy = func(o *Options) { inner(o); o.Caller = busyCallerStub{Caller: o.Caller, busy: true} }
	})
	calls := e.model.calls.Load()
	r := e.post("/v1/chat/completions", chat(qPara))
	if got := r.header.Get(HeaderCache); got != OutcomeHitSemantic {
		t.Fatalf("X-Breakwater-Cache = %q under pressure, want %q", got, OutcomeHitSemantic)
	}
	if got := e.model.calls.Load() - calls; got != 0 {
		t.Errorf("upstream calls under pressure = %d, want 0", got)
	}
	if st := est.Stats(); st.Samples != 0 || st.Skipped[verify.SkipBusy] != 1 {
		t.Errorf("estimate = %+v, want no sample and one busy skip", st)
	}
}

func TestRateZeroNeverSamples(t *testing.T) {
	e, est := verifyEnv(t, 0, false, nil)
	for range 3 {
		if r := e.post("/v1/chat/completions", chat(qPara)); r.header.Get(HeaderCache) == OutcomeMissSampled {
			t.Fatal("rate 0 sampled a hit")
		}
	}
	if st := est.Stats(); st.Samples != 0 {
		t.Errorf("samples = %d, want 0", st.Samples)
	}
}

func TestNearMissMatched(t *testing.T) {
	v, err := verify.New(verify.Options{MinSimilarity: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	e, est := verifyEnv(t, 0, true, func(eo *envOptions) {
		eo.cacheOpts = func(o *cache.Options) { o.Verifier = v }
	})
	r := e.post("/v1/chat/completions", chat(qNear))
	if got := r.header.Get(HeaderCache); got != OutcomeMiss {
		t.Fatalf("X-Breakwater-Cache = %q, want a miss (0.83 < 0.9, no judge)", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for est.Stats().NearMissesMatched == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := est.Stats(); st.NearMissesMatched != 1 || st.NearMissesDiffered != 0 {
		t.Errorf("near misses = %d matched, %d differed; want 1, 0", st.NearMissesMatched, st.NearMissesDiffered)
	}
}

// snapshotCaller reports a queue on its only target, through Snapshot only
// (no Busy method).
type snapshotCaller struct {
	Caller
	queued int
	state  string
}

func (s snapshotCaller) Snapshot() []upstream.ModelStats {
	return []upstream.ModelStats{{Name: "gpt-test", Targets: []upstream.TargetStats{{Name: "fake/gpt-test", State: s.state, Queued: s.queued}}}}
}

func TestSamplingSkipFromSnapshot(t *testing.T) {
	for _, c := range []struct {
		queued int
		state  string
	}{{3, "closed"}, {0, "open"}, {0, "half-open"}} {
		e, est := verifyEnv(t, 1, false, func(eo *envOptions) {
			inner := eo.proxy
			eo.proxy = func(o *Options) {
				inner(o)
				o.Caller = snapshotCaller{Caller: o.Caller, queued: c.queued, state: c.state}
			}
		})
		if r := e.post("/v1/chat/completions", chat(qPara)); r.header.Get(HeaderCache) != OutcomeHitSemantic {
			t.Errorf("queued %d, breaker %s: X-Breakwater-Cache = %q, want a hit (sample skipped)", c.queued, c.state, r.header.Get(HeaderCache))
		}
		if st := est.Stats(); st.Skipped[verify.SkipBusy] != 1 {
			t.Errorf("queued %d, breaker %s: skipped = %v", c.queued, c.state, st.Skipped)
		}
	}
}

// A streamed would-be hit is sampled like a JSON one: the client gets the
// fresh stream, and once it has ended whole its answer is compared with the
// cached one.
func TestSampledStreamComparedWhenItEnds(t *testing.T) {
	for _, constant := range []bool{false, true} {
		e, est := verifyEnv(t, 1, constant, nil)
		body := strings.Replace(chat(qPara), `{"model"`, `{"stream":true,"model"`, 1)
		r := e.post("/v1/chat/completions", body)
		if got := r.header.Get(HeaderCache); got != OutcomeMissSampled {
			t.Fatalf("constant %v: X-Breakwater-Cache = %q, want %q", constant, got, OutcomeMissSampled)
		}
		if !strings.Contains(string(r.body), "data: [DONE]") {
			t.Fatalf("constant %v: not a complete stream: %s", constant, r.body)
		}
		e.waitStreams()
		wantMismatches := uint64(1) // the fake model answers each wording differently
		if constant {
			wantMismatches = 0
		}
		if st := est.Stats(); st.Samples != 1 || st.Mismatches != wantMismatches {
			t.Errorf("constant %v: estimate = %+v, want one sample, %d mismatches", constant, st, wantMismatches)
		}
	}
}

// yesVerifier is a judge that calls every candidate the same question.
type yesVerifier struct{}

func (yesVerifier) Floor() float32 { return 0.5 }
func (yesVerifier) Limit() int     { return 1 }
func (yesVerifier) Verify(_ context.Context, _, _ string, cands []cache.Entry) ([]bool, bool) {
	out := make([]bool, len(cands))
	for i := range out {
		out[i] = true
	}
	return out, true
}

// A verified hit is promoted once it has been served; a verified hit that
// was sampled (answered fresh instead) is not, even when the fresh answer
// could not be stored.
func TestVerifiedHitPromotedOnlyWhenServed(t *testing.T) {
	var draws atomic.Int64 // the first draw samples, the others do not
	e, _ := verifyEnv(t, 0.5, false, func(eo *envOptions) {
		inner := eo.proxy
		eo.proxy = func(o *Options) {
			inner(o)
			o.Verify.Rand = func() float64 {
				if draws.Add(1) == 1 {
					return 0
				}
				return 1
			}
		}
		eo.cacheOpts = func(o *cache.Options) { o.Verifier = yesVerifier{} }
	})
	// The sampled request's fresh answer is refused (a 4xx, passed
	// through and never stored): had the lookup promoted the hit, its
	// wording would now hit exactly.
	e.model.HandleFunc = func(w http.ResponseWriter, _ *http.Request, _ map[string]any) bool {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "refused", "type": "invalid_request_error"}})
		return true
	}
	if r := e.post("/v1/chat/completions", chat(qPara)); r.header.Get(HeaderCache) != OutcomeMissSampled || r.status != http.StatusBadRequest {
		t.Fatalf("first paraphrase: %s, status %d; want %s, 400", r.header.Get(HeaderCache), r.status, OutcomeMissSampled)
	}
	if r := e.post("/v1/chat/completions", chat(qPara)); r.header.Get(HeaderCache) != OutcomeHitSemantic {
		t.Fatalf("after a sampled hit: %s = %q, want %q (a sampled hit is never promoted)", HeaderCache, r.header.Get(HeaderCache), OutcomeHitSemantic)
	}
	r := e.post("/v1/chat/completions", chat(qPara))
	if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
		t.Fatalf("after a served verified hit: %s = %q, want %q (promoted)", HeaderCache, got, want)
	}
	if got, want := r.content(t), "answer to: "+qStored; got != want {
		t.Errorf("promoted answer %q, want %q", got, want)
	}
	if got, want := e.cache.Stats(t.Context()).Promotions, uint64(1); got != want {
		t.Errorf("Promotions = %d, want %d", got, want)
	}
}
