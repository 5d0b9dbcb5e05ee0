package evalcmd

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/guard"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/embed"
	"github.com/breakwater-dev/breakwater/lib/judgeprompt"
	"github.com/breakwater-dev/breakwater/proxy"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire/apis"
)

// Replay modes.
const (
	ModeStatic   = "static"
	ModeVerified = "verified"
)

// ReplayOptions configure a replay.
type ReplayOptions struct {
	// Threshold is the static similarity threshold (both modes: in the
	// verified mode it decides when the judge gives no verdict).
	Threshold float32
	// MinSimilarity, Candidates and SampleRate are [cache.verify]'s.
	MinSimilarity float32
	Candidates    int
	SampleRate    float64
	// GuardSlack is guard.Options.MaxUnmatched for judged candidates.
	GuardSlack int
	// JudgeAccuracy is the probability that the simulated model's verdict
	// on a judge prompt is right.
	JudgeAccuracy float64
	// AnswerTokens is the output usage the simulated model reports for an
	// answer (the trace's answers are ids; a real answer is longer), what a
	// hit saves beside the question's input tokens. Zero:
	// DefaultAnswerTokens.
	AnswerTokens int
	// Seed fixes the simulated judge's mistakes, the sampling and the end
	// users.
	Seed uint64
	// Users spreads the requests over this many end users (each request's
	// safety_identifier drawn uniformly); 0 sends none (one anonymous user).
	Users int
	// CrossUser is cache.Options.CrossUser ("": the default).
	CrossUser string
	// Progress, if set, is called every few hundred requests.
	Progress func(mode string, done, total int)
}

// ModeReport is what one mode served.
type ModeReport struct {
	Mode     string `json:"mode"`
	Requests int    `json:"requests"`
	// ExactHits are repeats served from the exact tier; ExactWrong those
	// whose answer is wrong (a wrong semantic hit promoted under its key).
	ExactHits  int `json:"exact_hits"`
	ExactWrong int `json:"exact_wrong"`
	// SemanticHits are answers served from the semantic tier; WrongHits
	// those whose answer id differs from the request's.
	SemanticHits int `json:"semantic_hits"`
	RightHits    int `json:"right_semantic_hits"`
	WrongHits    int `json:"wrong_semantic_hits"`
	// WrongRate = WrongHits / SemanticHits, the measured false-hit rate.
	WrongRate Interval `json:"wrong_rate"`
	// RightHitRate = (ExactHits - ExactWrong + RightHits) / Requests: requests answered
	// rightly without an upstream call.
	RightHitRate Interval `json:"right_hit_rate"`
	// NewWordings are the requests whose question was never asked verbatim
	// before in the trace: no exact entry can answer them, so an answer
	// from the cache is a semantic hit in either mode, whatever each mode
	// promotes afterwards. NewRight are those answered rightly from the
	// cache, NewWrong wrongly; NewRightRate = NewRight / NewWordings. This
	// is the figure comparable between modes: since a semantic hit is
	// promoted into the exact tier only when a judge verified it, the
	// static mode's repeats of a paraphrase come back as semantic hits
	// again and inflate its RightHits, the verified mode's as exact hits.
	NewWordings  int      `json:"new_wordings"`
	NewRight     int      `json:"new_wording_right_hits"`
	NewWrong     int      `json:"new_wording_wrong_hits"`
	NewRightRate Interval `json:"new_wording_right_rate"`
	// newRight[i] says whether the i-th new wording was answered rightly
	// from the cache (for the paired interval of NewWordingRatio).
	newRight []bool
	// Sampled are would-be semantic hits answered fresh for the estimate.
	Sampled int `json:"sampled"`
	// UpstreamCalls are the model's answers to questions, JudgeCalls its
	// answers to the judge's prompts (each a call upstream too).
	UpstreamCalls int64             `json:"upstream_calls"`
	JudgeCalls    int64             `json:"judge_calls"`
	Judge         verify.JudgeStats `json:"judge"`
	// TokensSaved are the tokens the cache's answers kept from the model
	// (/stats tokens.saved), TokensJudge what the judge's calls spent
	// (tokens.verification), JudgeShare the second over the first.
	TokensSaved proxy.TokenCount `json:"tokens_saved"`
	TokensJudge proxy.TokenCount `json:"tokens_judge"`
	JudgeShare  float64          `json:"judge_tokens_share_of_saved"`
	// Live is the proxy's own estimate of WrongRate from its samples;
	// Contains says whether its interval holds the measured WrongRate.
	Live     verify.EstimateStats `json:"live"`
	Contains bool                 `json:"live_interval_contains_measured"`
}

// DefaultAnswerTokens is the simulated model's output usage per answer: a
// short chat answer (a paragraph or two).
const DefaultAnswerTokens = 300

// simulator is the replay's upstream: chat answers name the question's
// answer id, and the judge's prompts (judgeprompt) get a verdict right
// with a fixed probability.
type simulator struct {
	answers      map[string]string
	accuracy     float64
	seed         uint64
	answerTokens int
	chats        atomic.Int64
	judges       atomic.Int64
}

// approxTokens is a token count of text at four bytes a token, the usual
// rule of thumb for English with the providers' BPE tokenizers.
func approxTokens(text string) int { return (len(text) + 3) / 4 }

// AnswerFor is the simulated model's answer to a question whose answer id is id.
func AnswerFor(id string) string { return "The answer is " + id + "." }

func (s *simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions":
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		last := req.Messages[len(req.Messages)-1].Content
		text, in, out := AnswerFor(s.answers[last]), approxTokens(last), s.answerTokens
		if sys := req.Messages[0]; len(req.Messages) == 2 && sys.Role == "system" && strings.Contains(sys.Content, "<question-A-") {
			s.judges.Add(1)
			text = judgeprompt.Naive(sys.Content, last, s.judge)
			in, out = approxTokens(sys.Content)+approxTokens(last), approxTokens(text)
		} else {
			s.chats.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-sim", "object": "chat.completion", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
		})
	default:
		http.NotFound(w, r)
	}
}

// judge is the simulated judge's verdict: the truth, flipped for a fixed
// share of pairs chosen by a hash of the pair (so a pair always gets the
// same verdict, as from a deterministic model).
func (s *simulator) judge(query, doc string) bool {
	a, b := s.answers[query], s.answers[doc]
	truth := a != "" && a == b
	h := fnv.New64a()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], s.seed)
	h.Write(seed[:])
	h.Write([]byte(query))
	h.Write([]byte{0})
	h.Write([]byte(doc))
	u := float64(h.Sum64()>>11) / float64(1<<53)
	if u < s.accuracy {
		return truth
	}
	return !truth
}

// countingIndex counts the items written, so the replay can wait for each
// miss to be indexed before the next request (as a trace spread over time
// would be) and stay reproducible.
type countingIndex struct {
	cache.Index
	written atomic.Int64
}

func (c *countingIndex) Upsert(ctx context.Context, items []cache.IndexItem) error {
	err := c.Index.Upsert(ctx, items)
	if err == nil {
		c.written.Add(int64(len(items)))
	}
	return err
}

// Replay runs trace through the real tiers (exact tier, built-in encoder,
// embedded index, guard, proxy, caller) against a simulated upstream, once
// per mode, and reports each. emb is shared by both modes.
func Replay(ctx context.Context, trace []TraceLine, emb embed.Embedder, newIndex func(entries int) (cache.Index, error), o ReplayOptions) ([]ModeReport, error) {
	sim := &simulator{answers: map[string]string{}, accuracy: o.JudgeAccuracy, seed: o.Seed, answerTokens: o.AnswerTokens}
	if sim.answerTokens <= 0 {
		sim.answerTokens = DefaultAnswerTokens
	}
	for _, l := range trace {
		if prev, ok := sim.answers[l.Question]; ok && prev != l.Answer {
			return nil, fmt.Errorf("replay trace: %q has two answer ids, %s and %s", l.Question, prev, l.Answer)
		}
		sim.answers[l.Question] = l.Answer
	}
	// The judge is asked about the texts the cache keeps, which are folded
	// (cache.SemanticText): let it find those too.
	for _, l := range trace {
		if q, _ := cache.SemanticText(l.Question); q != l.Question {
			if _, ok := sim.answers[q]; !ok {
				sim.answers[q] = l.Answer
			}
		}
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	var out []ModeReport
	for _, mode := range []string{ModeStatic, ModeVerified} {
		rep, err := replayMode(ctx, trace, emb, newIndex, sim, srv.URL, mode, o)
		if err != nil {
			return nil, err
		}
		out = append(out, rep)
	}
	return out, nil
}

func replayMode(ctx context.Context, trace []TraceLine, emb embed.Embedder, newIndex func(int) (cache.Index, error),
	sim *simulator, url, mode string, o ReplayOptions) (ModeReport, error) {
	rep := ModeReport{Mode: mode, Requests: len(trace)}
	inner, err := newIndex(len(trace))
	if err != nil {
		return rep, fmt.Errorf("open index: %w", err)
	}
	defer inner.Close()
	idx := &countingIndex{Index: inner}
	var judged func(q, c string) (bool, string)
	vo := verify.Options{MinSimilarity: o.MinSimilarity, Candidates: o.Candidates}
	if mode == ModeVerified {
		// The default judge: the request's own model, a candidate
		// without a verdict a miss.
		vo.Judge, vo.NoVerdictMiss = verify.Auto{}, true
		strict := guard.New(guard.Options{}).Check
		vo.Strict = func(q, c string) bool { ok, _ := strict(q, c); return ok }
		judged = guard.New(guard.Options{MaxUnmatched: o.GuardSlack}).Check
	}
	v, err := verify.New(vo)
	if err != nil {
		return rep, err
	}
	defer v.Close()
	c := cache.New(cache.Options{
		Index: idx, Embedder: emb, Threshold: o.Threshold, Verifier: v,
		Guard: guard.New(guard.Options{}).Check, JudgedGuard: judged, QueueSize: 4096,
		CrossUser: o.CrossUser,
	})
	defer c.Close(context.Background())
	caller, err := upstream.New(upstream.Options{
		Upstreams:       []upstream.Upstream{{Name: "sim", BaseURL: url + "/v1", Timeout: 30 * time.Second}},
		DefaultUpstream: "sim",
		Retry:           upstream.RetryPolicy{MaxAttempts: 1, Deadline: 30 * time.Second},
	})
	if err != nil {
		return rep, err
	}
	part, err := cache.NewPartitioner([]byte("replay-partition-secret-0123456789"), []string{cache.ByAuthorization})
	if err != nil {
		return rep, err
	}
	est := verify.NewEstimator(nil, nil)
	cmp := &verify.Comparer{Embedder: emb, Guard: guard.New(guard.Options{NoDirectives: true}).Check} // as internal/app does
	var rngMu sync.Mutex
	rng := newSplitMix(o.Seed ^ 0x73616d706c65)
	srv, err := proxy.New(proxy.Options{
		Cache: c, Caller: caller, Partitioner: part, CacheOptions: proxy.CacheOptions{MaxTemperature: 1}, APIs: apis.All,
		Logger: slog.New(slog.DiscardHandler),
		Verify: &proxy.Verify{
			Rate: o.SampleRate, Estimator: est, Judge: v, Compare: cmp.Same, Auto: mode == ModeVerified,
			Rand: func() float64 { rngMu.Lock(); defer rngMu.Unlock(); return rng.float() },
		},
	})
	if err != nil {
		return rep, err
	}
	defer srv.Close()
	h := srv.Handler()
	chats0, judges0 := sim.chats.Load(), sim.judges.Load()
	var stored int64
	users := newSplitMix(o.Seed ^ 0x7573657273)
	asked := make(map[string]bool, len(trace))
	for i, l := range trace {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		payload := map[string]any{
			"model": "sim-model", "temperature": 0,
			"messages": []any{map[string]any{"role": "user", "content": l.Question}},
		}
		if o.Users > 0 {
			payload["safety_identifier"] = fmt.Sprintf("user-%d", int(users.float()*float64(o.Users)))
		}
		body, _ := json.Marshal(payload)
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer replay")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return rep, fmt.Errorf("replay %s: request %d: status %d: %.200s", mode, i+1, rec.Code, rec.Body.String())
		}
		outcome := rec.Header().Get(proxy.HeaderCache)
		if !asked[l.Question] {
			asked[l.Question] = true
			rep.NewWordings++
			right := false
			if outcome == proxy.OutcomeHitExact || outcome == proxy.OutcomeHitSemantic {
				right = verify.AnswerText(rec.Body.Bytes()) == AnswerFor(l.Answer)
				if right {
					rep.NewRight++
				} else {
					rep.NewWrong++
				}
			}
			rep.newRight = append(rep.newRight, right)
		}
		switch outcome {
		case proxy.OutcomeHitExact:
			rep.ExactHits++
			if verify.AnswerText(rec.Body.Bytes()) != AnswerFor(l.Answer) {
				rep.ExactWrong++
			}
		case proxy.OutcomeHitSemantic:
			rep.SemanticHits++
			if verify.AnswerText(rec.Body.Bytes()) == AnswerFor(l.Answer) {
				rep.RightHits++
			} else {
				rep.WrongHits++
			}
		case proxy.OutcomeMissSampled:
			rep.Sampled++
			stored += indexed(emb, l.Question)
		case proxy.OutcomeMiss:
			stored += indexed(emb, l.Question)
		}
		waitWritten(idx, stored)
		if o.Progress != nil && (i+1)%250 == 0 {
			o.Progress(mode, i+1, len(trace))
		}
	}
	rep.WrongRate = Wilson(rep.WrongHits, rep.SemanticHits)
	rep.RightHitRate = Wilson(rep.ExactHits-rep.ExactWrong+rep.RightHits, rep.Requests)
	rep.NewRightRate = Wilson(rep.NewRight, rep.NewWordings)
	rep.UpstreamCalls = sim.chats.Load() - chats0
	rep.JudgeCalls = sim.judges.Load() - judges0
	tok := srv.Snapshot().Tokens
	rep.TokensSaved, rep.TokensJudge = tok.Saved, tok.Verification
	if saved := tok.Saved.Input + tok.Saved.Output; saved > 0 {
		rep.JudgeShare = float64(tok.Verification.Input+tok.Verification.Output) / float64(saved)
	}
	rep.Judge = v.Stats()
	rep.Live = est.Stats()
	rep.Live.Timeline = nil
	m := rep.WrongRate.Value
	rep.Contains = rep.Live.FalseHitRate.Low <= m && m <= rep.Live.FalseHitRate.High
	return rep, nil
}

// indexed is 1 when a miss on question is written to the index, 0 when the
// semantic tier cannot see it (cache.Seen) and keeps it in the exact tier
// only.
func indexed(emb embed.Embedder, question string) int64 {
	if _, ok := cache.Seen(emb, question); ok {
		return 1
	}
	return 0
}

// waitWritten waits (bounded) until idx has written n items.
func waitWritten(idx *countingIndex, n int64) {
	deadline := time.Now().Add(10 * time.Second)
	for idx.written.Load() < n && time.Now().Before(deadline) {
		time.Sleep(200 * time.Microsecond)
	}
}

// splitMix is a small seeded generator for the sampling draws.
type splitMix struct{ s uint64 }

func newSplitMix(seed uint64) *splitMix { return &splitMix{s: seed} }

func (r *splitMix) float() float64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / float64(1<<53)
}

// writeReplay prints the modes side by side.
func writeReplay(w io.Writer, rep TraceReport, o ReplayOptions) error {
	reps := rep.Modes
	fmt.Fprintf(w, "replay: %d requests; static threshold %.2f; verified: the default judge (auto: the request's model) from %.2f, the simulated model's verdicts right %.0f %% of the time; answers of %d tokens; %.0f %% of would-be semantic hits sampled\n",
		reps[0].Requests, o.Threshold, o.MinSimilarity, o.JudgeAccuracy*100, cmp.Or(o.AnswerTokens, DefaultAnswerTokens), o.SampleRate*100)
	users := "no end-user identity (one anonymous user)"
	if o.Users > 0 {
		users = fmt.Sprintf("%d end users, drawn uniformly", o.Users)
	}
	fmt.Fprintf(w, "%s; cross_user %q\n\n", users, cmp.Or(o.CrossUser, cache.DefaultCrossUser))
	fmt.Fprintf(w, "%-9s %7s %6s %9s %7s %6s %-22s %-22s %7s %-22s %-12s %8s %8s %-22s %s\n",
		"mode", "exact", "(wrong)", "semantic", "right", "wrong", "wrong rate [95% CI]", "right-hit rate [95% CI]", "judge", "judge/requests [95% CI]", "judge tokens", "upstream", "sampled", "live estimate [95% CI]", "contains")
	for _, r := range reps {
		fmt.Fprintf(w, "%-9s %7d %6d %9d %7d %6d %-22s %-22s %7d %-22s %-12s %8d %8d %-22s %v\n",
			r.Mode, r.ExactHits, r.ExactWrong, r.SemanticHits, r.RightHits, r.WrongHits, fmtInterval(r.WrongRate), fmtInterval(r.RightHitRate),
			r.JudgeCalls, fmtInterval(Wilson(int(r.JudgeCalls), r.Requests)), fmt.Sprintf("%.2f %%", 100*r.JudgeShare), r.UpstreamCalls, r.Live.Samples,
			fmtInterval(Interval{Value: r.Live.FalseHitRate.Value, Low: r.Live.FalseHitRate.Low, High: r.Live.FalseHitRate.High}), r.Contains)
	}
	fmt.Fprintf(w, "\nnew wordings (questions never asked verbatim before) answered rightly from the cache:\n")
	for _, r := range reps {
		fmt.Fprintf(w, "%-9s %d of %d, %s; wrongly %d\n", r.Mode, r.NewRight, r.NewWordings, fmtInterval(r.NewRightRate), r.NewWrong)
	}
	if q := rep.NewWordingRatio; q.Resamples > 0 {
		fmt.Fprintf(w, "verified / static: %.2f× [%.2f, %.2f] (95 %%, paired bootstrap over the new wordings, %d resamples)\n", q.Value, q.Low, q.High, q.Resamples)
	}
	return nil
}

func fmtInterval(iv Interval) string {
	return fmt.Sprintf("%.3f [%.3f, %.3f]", iv.Value, iv.Low, iv.High)
}
