package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/lib/judgeprompt"
)

// rerankServer serves the Cohere-compatible rerank API: a document is
// relevant (score 0.9) when same(query, doc), else 0.1. It counts calls.
type rerankServer struct {
	same  func(q, d string) bool
	calls atomic.Int64
	delay chan struct{} // when set, every call waits for it or the client
	last  atomic.Value  // the last request, decoded
	auth  atomic.Value
}

func (s *rerankServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/rerank" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	s.calls.Add(1)
	s.auth.Store(r.Header.Get("Authorization"))
	if s.delay != nil {
		select {
		case <-s.delay:
		case <-r.Context().Done():
			return
		}
	}
	var req rerankRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.last.Store(req)
	type result struct {
		Index int     `json:"index"`
		Score float64 `json:"relevance_score"`
	}
	var res []result
	for i, d := range req.Documents {
		score := 0.1
		if s.same(req.Query, d) {
			score = 0.9
		}
		res = append(res, result{i, score})
	}
	// Cohere sorts results by relevance; the judge must use "index".
	if len(res) > 1 {
		res[0], res[len(res)-1] = res[len(res)-1], res[0]
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "r", "results": res})
}

func sameFirstWord(q, d string) bool { return strings.Fields(q)[0] == strings.Fields(d)[0] }

func newRerank(t *testing.T, s *rerankServer) (*Rerank, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	r, err := NewRerank(RerankOptions{URL: srv.URL + "/v1/", Model: "bge", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	return r, srv
}

func TestRerankJudge(t *testing.T) {
	s := &rerankServer{same: sameFirstWord}
	r, _ := newRerank(t, s)
	got, err := r.Judge(t.Context(), "paris capital", []string{"rome capital", "paris city", "berlin", "paris"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, false, true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("verdicts = %v, want %v", got, want)
	}
	req := s.last.Load().(rerankRequest)
	if req.Model != "bge" || req.Query != "paris capital" || len(req.Documents) != 4 {
		t.Errorf("request = %+v", req)
	}
	if got := s.auth.Load(); got != "Bearer k" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestRerankRejectsBadResponses(t *testing.T) {
	for name, body := range map[string]string{
		"index out of range": `{"results":[{"index":3,"relevance_score":0.9}]}`,
		"repeated index":     `{"results":[{"index":0,"relevance_score":0.9},{"index":0,"relevance_score":0.1}]}`,
		"no score":           `{"results":[{"index":0}]}`,
		"no results":         `{"results":[]}`,
		"not json":           `relevant!`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
			defer srv.Close()
			r, err := NewRerank(RerankOptions{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := r.Judge(t.Context(), "q", []string{"a", "b"}); err == nil {
				t.Errorf("Judge = %v, want an error", got)
			}
		})
	}
}

// chatJudgeServer is an OpenAI-compatible chat endpoint whose replies the
// test scripts; it decodes requests with go-openai's types.
func chatJudgeServer(t *testing.T, reply func(a, b string) string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req openai.ChatCompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) != 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		a, b, ok := judgeprompt.Read(req.Messages[1].Content)
		if !ok || req.Messages[0].Role != "system" {
			http.Error(w, "not the judge prompt", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
			ID: "c", Object: "chat.completion", Model: req.Model,
			Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Role: "assistant", Content: reply(a, b)}, FinishReason: "stop"}},
		})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// httpCompleter posts the judge's requests to a Chat Completions server with
// the standard client; internal/app wires the upstream caller instead.
type httpCompleter struct{ url string }

func (h httpCompleter) Complete(ctx context.Context, model, class string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, answer, err
}

func newCaller(_ *testing.T, url string) httpCompleter { return httpCompleter{url: url} }

func TestLLMJudge(t *testing.T) {
	srv, _ := chatJudgeServer(t, func(a, b string) string {
		return fmt.Sprintf(" {\"same\": %v}\n", sameFirstWord(a, b))
	})
	j, err := NewLLM(LLMOptions{Caller: newCaller(t, srv.URL), Model: "small"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Judge(t.Context(), "paris capital", []string{"rome capital", "paris city"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("verdicts = %v, want %v", got, want)
	}
}

func TestLLMJudgeProseFallsBack(t *testing.T) {
	srv, _ := chatJudgeServer(t, func(a, b string) string { return `Yes, {"same": true}` })
	j, err := NewLLM(LLMOptions{Caller: newCaller(t, srv.URL), Model: "small"})
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, Options{Judge: j})
	if got, ok := v.Verify(t.Context(), "p", "paris capital", entries("paris city")); ok {
		t.Fatalf("Verify = %v from prose, want no verdict", got)
	}
	if got := v.Stats().Fallbacks[FallbackError]; got != 1 {
		t.Errorf("error fallbacks = %d, want 1", got)
	}
}

func TestParseVerdict(t *testing.T) {
	wrap := func(content string) []byte {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": content}}}})
		return b
	}
	for content, want := range map[string]any{
		`{"same": true}`:               true,
		"  {\"same\":false}\n":         false,
		`{"same": "yes"}`:              "error",
		`{"same": true, "why": "x"}`:   "error",
		`{}`:                           "error",
		`{"same": true} {"same":true}`: "error",
		"```json\n{\"same\": true}```": "error",
		`true`:                         "error",
	} {
		got, err := ParseVerdict(wrap(content))
		if want == "error" {
			if err == nil {
				t.Errorf("ParseVerdict(%q) = %v, want an error", content, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseVerdict(%q) = %v, %v; want %v", content, got, err, want)
		}
	}
}

func newVerifier(t *testing.T, o Options) *Verifier {
	t.Helper()
	v, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

func entries(queries ...string) []cache.Entry {
	out := make([]cache.Entry, len(queries))
	for i, q := range queries {
		out[i] = cache.Entry{Key: fmt.Sprintf("k%d-%s", i, q), Query: q}
	}
	return out
}

func TestVerifierFallsBackWhenSlow(t *testing.T) {
	s := &rerankServer{same: sameFirstWord, delay: make(chan struct{})}
	defer close(s.delay)
	r, _ := newRerank(t, s)
	v := newVerifier(t, Options{Judge: r, Timeout: 50 * time.Millisecond})
	if got, ok := v.Verify(t.Context(), "p", "paris capital", entries("paris city")); ok {
		t.Fatalf("Verify = %v from a judge that never answers", got)
	}
	st := v.Stats()
	if st.Fallbacks[FallbackTimeout] != 1 || st.FallbacksTotal != 1 {
		t.Errorf("fallbacks = %v, want one timeout", st.Fallbacks)
	}
}

func TestVerifierFallsBackWhenDown(t *testing.T) {
	s := &rerankServer{same: sameFirstWord}
	r, srv := newRerank(t, s)
	srv.Close()
	v := newVerifier(t, Options{Judge: r})
	if got, ok := v.Verify(t.Context(), "p", "paris capital", entries("paris city")); ok {
		t.Fatalf("Verify = %v from a closed server", got)
	}
	if got := v.Stats().Fallbacks[FallbackError]; got != 1 {
		t.Errorf("error fallbacks = %d, want 1", got)
	}
}

func TestVerifierFallsBackWhenSlotsStayBusy(t *testing.T) {
	s := &rerankServer{same: sameFirstWord, delay: make(chan struct{})}
	r, _ := newRerank(t, s)
	v := newVerifier(t, Options{Judge: r, Concurrency: 1, Timeout: time.Minute, SlotWait: 20 * time.Millisecond})
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.Verify(context.Background(), "p", "paris capital", entries("paris city"))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first call never reached the judge")
		}
		time.Sleep(time.Millisecond)
	}
	if got, ok := v.Verify(t.Context(), "p", "rome capital", entries("rome city")); ok {
		t.Errorf("Verify = %v while the only slot was taken", got)
	}
	if got := v.Stats().Fallbacks[FallbackBusy]; got != 1 {
		t.Errorf("busy fallbacks = %d, want 1", got)
	}
	close(s.delay)
	<-done
	pressure := true
	v2 := newVerifier(t, Options{Judge: r, Busy: func() bool { return pressure }})
	if _, ok := v2.Verify(t.Context(), "p", "x y", entries("x z")); ok || v2.Stats().Fallbacks[FallbackBusy] != 1 {
		t.Errorf("Busy() = true did not skip the judge: %+v", v2.Stats())
	}
}

func TestVerdictsCachedPerTenant(t *testing.T) {
	s := &rerankServer{same: sameFirstWord}
	r, _ := newRerank(t, s)
	v := newVerifier(t, Options{Judge: r})
	cands := entries("paris city", "rome city")
	for range 3 {
		if got, ok := v.Verify(t.Context(), "tenant-a", "paris capital", cands); !ok || !got[0] || got[1] {
			t.Fatalf("tenant A verdicts = %v, %v", got, ok)
		}
	}
	if got := s.calls.Load(); got != 1 {
		t.Errorf("judge calls for one tenant's repeated pair = %d, want 1 (verdicts cached)", got)
	}
	// The same question and entry for another tenant is judged again, and a
	// judge that changed its mind shows that B never reads A's verdict.
	s.same = func(q, d string) bool { return false }
	if got, ok := v.Verify(t.Context(), "tenant-b", "paris capital", cands); !ok || got[0] {
		t.Errorf("tenant B verdicts = %v, %v; want B's own rejection", got, ok)
	}
	if got := s.calls.Load(); got != 2 {
		t.Errorf("judge calls = %d, want 2 (B judged on its own)", got)
	}
	if got, ok := v.Verify(t.Context(), "tenant-a", "paris capital", cands); !ok || !got[0] {
		t.Errorf("tenant A verdicts after B = %v, %v; want A's cached accept", got, ok)
	}
}

func TestNoJudgeGivesNoVerdict(t *testing.T) {
	v := newVerifier(t, Options{})
	if _, ok := v.Verify(t.Context(), "p", "q", entries("q")); ok {
		t.Error("a verifier without a judge gave a verdict")
	}
	if st := v.Stats(); st.Judge != JudgeNone || st.FallbacksTotal != 0 {
		t.Errorf("Stats = %+v, want judge none and no fallbacks", st)
	}
}

func TestWilson(t *testing.T) {
	// Reference values: Wilson (1927), as tabulated by Newcombe (1998), Table I.
	for _, c := range []struct {
		k, n      uint64
		low, high float64
	}{{0, 10, 0, 0.2775}, {1, 29, 0.0061, 0.1718}, {81, 263, 0.2553, 0.3662}, {15, 148, 0.0624, 0.1605}} {
		iv := Wilson(c.k, c.n)
		if diff(iv.Low, c.low) > 5e-4 || diff(iv.High, c.high) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, iv.Low, iv.High, c.low, c.high)
		}
	}
	if iv := Wilson(0, 0); iv.Low != 0 || iv.High != 1 {
		t.Errorf("Wilson(0, 0) = %+v, want [0, 1]", iv)
	}
}

func diff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestEstimateCoverage feeds the Estimator samples of a known false-hit rate
// and checks that its 95 % interval contains the rate in about 95 % of runs.
func TestEstimateCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const runs, samples, rate = 2000, 60, 0.04
	covered := 0
	for range runs {
		e := NewEstimator(nil, nil)
		for range samples {
			e.Sample(rng.Float64() >= rate)
		}
		if iv := e.Stats().FalseHitRate; iv.Low <= rate && rate <= iv.High {
			covered++
		}
	}
	if got := float64(covered) / runs; got < 0.92 || got > 0.99 {
		t.Errorf("coverage = %.3f over %d runs, want about 0.95", got, runs)
	}
}

func TestEstimatorCounts(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	e := NewEstimator(nil, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	e.Sample(true)
	e.Sample(false)
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	e.Sample(true)
	e.Sample(true)
	e.Skip(SkipBusy)
	e.NearMiss(true)
	e.NearMiss(false)
	st := e.Stats()
	if st.Samples != 4 || st.Mismatches != 1 || st.FalseHitRate.Value != 0.25 || st.Skipped[SkipBusy] != 1 ||
		st.NearMissesMatched != 1 || st.NearMissesDiffered != 1 {
		t.Errorf("Stats = %+v", st)
	}
	if len(st.Timeline) != 2 || st.Timeline[0].FalseHitRate.Value != 0.5 || st.Timeline[1].Samples != 4 {
		t.Errorf("Timeline = %+v, want one point per minute", st.Timeline)
	}
}

// TestRerankAtTheRoot: a reranker serving only /rerank at the root (as
// Infinity does) is found from a URL ending in /v1, and kept.
func TestRerankAtTheRoot(t *testing.T) {
	var paths []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/rerank" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"results":[{"index":0,"relevance_score":0.8}]}`)
	}))
	defer srv.Close()
	r, err := NewRerank(RerankOptions{URL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got, err := r.Judge(t.Context(), "q", []string{"d"}); err != nil || !got[0] {
			t.Fatalf("Judge = %v, %v", got, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "[/v1/rerank /rerank /rerank]"; fmt.Sprint(paths) != want {
		t.Errorf("paths = %v, want %s", paths, want)
	}
}

// orderJudge says "same" when its query comes first in order, whatever the
// candidate: a judge that favours one position.
type orderJudge struct{ calls atomic.Int64 }

func (o *orderJudge) Name() string { return "order" }
func (o *orderJudge) Judge(_ context.Context, query string, cands []string) ([]bool, error) {
	o.calls.Add(1)
	out := make([]bool, len(cands))
	for i, c := range cands {
		out[i] = query < c
	}
	return out, nil
}

// TestSecondOpinion: a "same" on a candidate the strict guard refuses is
// asked again with the questions swapped and served only when both agree;
// one the strict guard accepts takes one verdict.
func TestSecondOpinion(t *testing.T) {
	j := &orderJudge{}
	strictOK := func(q, c string) bool { return strings.HasPrefix(c, "ok") }
	v := newVerifier(t, Options{Judge: j, Strict: strictOK})
	got, ok := v.Verify(t.Context(), "p", "a question", entries("ok b", "slack b"))
	if !ok || !got[0] || got[1] {
		t.Fatalf("verdicts %v, %v; want [true false]: the slack candidate's swapped verdict disagrees", got, ok)
	}
	if n, s := j.calls.Load(), v.Stats().SecondOpinions; n != 2 || s != 1 {
		t.Errorf("judge calls %d, second opinions %d; want 2 and 1", n, s)
	}
}
