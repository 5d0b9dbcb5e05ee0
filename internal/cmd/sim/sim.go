// Package sim is a simulated OpenAI-compatible model endpoint for demos and load tests: configurable latency, capacity, error rate and deterministic answers.
package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/cache/guard"
	"github.com/breakwater-dev/breakwater/lib/judgeprompt"
)

// Jitter distributions.
const (
	DistExponential = "exponential"
	DistLognormal   = "lognormal"
	DistUniform     = "uniform"
)

// Options configure a simulated model. The zero value answers at once, with
// no capacity limit and no errors.
type Options struct {
	// Latency is the fixed part of the time to the first byte. Zero: none.
	Latency time.Duration
	// Jitter is the mean of the random part added to Latency, drawn from
	// Dist. Zero: none.
	Jitter time.Duration
	// Dist is the jitter distribution: DistExponential (default),
	// DistLognormal (sigma 0.5, so a long right tail) or DistUniform
	// (uniform on [0, 2·Jitter]).
	Dist string
	// PerToken is the generation time of one completion token: the delay
	// between streamed chunks, and added per token before a non-streamed
	// answer. Zero: none.
	PerToken time.Duration
	// Capacity is how many model calls may be in flight at once; beyond it
	// the call is answered 429 with Retry-After and an OpenAI-shaped
	// "model is at capacity" error. Zero: unlimited.
	Capacity int
	// Steps change Capacity during a run: each applies from its After,
	// counted from the first model call, until the next one. Nil: Capacity
	// throughout.
	Steps []Step
	// RetryAfter is the wait a 429 asks for (Retry-After in whole seconds,
	// rounded up, and retry-after-ms). Zero: 1s.
	RetryAfter time.Duration
	// ErrorRate is the share of admitted calls answered 503, in [0, 1].
	ErrorRate float64
	// CutRate is the share of /v1/messages streams that end halfway with an
	// overloaded_error event after the 200, in [0, 1].
	CutRate float64
	// RefuseFirst, above 0, makes the model refuse each prompt's first
	// RefuseFirst calls, whatever its capacity, in the API's own shape (see
	// refuse), and admit the calls after them as usual: a model overloaded
	// for a moment, as a client retrying one prompt meets it. A prompt is
	// the last user text of the request, whatever its API. Zero: no such
	// refusals.
	RefuseFirst int
	// CountPrompts keeps each prompt's count of calls for Attempts (it is
	// kept whenever RefuseFirst is above 0). Off, a call is not parsed for
	// its prompt, so a benchmark's upstream costs no more.
	CountPrompts bool
	// Seed makes jitter and errors reproducible. Zero: 1.
	Seed uint64
	// Models are the names /v1/models lists. Nil: ["gpt-test"].
	Models []string
	// Dimension is the length of /v1/embeddings vectors. Zero: 64.
	Dimension int
	// Same is the truth the simulated model judges by when it is asked the
	// cache's judge prompt (lib/judgeprompt, on chat and
	// messages): whether one answer serves both questions. Nil: the
	// questions are the same when the cache's strict guard accepts the pair
	// (no answer-determining word differs, every content word has a
	// counterpart), as a model would read a light rewording.
	Same func(a, b string) bool
	// JudgeAccuracy is the share of judge prompts answered with the truth;
	// the others get the opposite verdict, chosen by a hash of the pair and
	// Seed, so a pair always gets the same one (a deterministic model that
	// is wrong about some pairs). Zero: DefaultJudgeAccuracy.
	JudgeAccuracy float64
	// RPM, TPM, ITPM and OTPM are budgets per minute, each with its
	// provider's accounting, headers and refusals (see tokens.go): requests
	// (every API); tokens, input and output counted together (OpenAI's
	// endpoints) or input alone (Gemini's); input tokens and output tokens
	// (Anthropic Messages). Zero: no such limit.
	RPM, TPM, ITPM, OTPM int
	// Burst is how much of a minute's budget each of those buckets holds
	// (a request larger than that can never fit). Zero: a minute.
	Burst time.Duration
}

// DefaultJudgeAccuracy is how often the simulated model's verdict on a
// judge prompt is the truth: about what small chat models reach on
// question-pair benchmarks (docs/PRECISION.md).
const DefaultJudgeAccuracy = 0.95

// judge answers the cache's judge prompt (system names the fences): the
// verdict, as a model that obeys what is outside the fences would give it
// (judgeprompt.Naive), right JudgeAccuracy of the time. ok is false for
// any other prompt.
func (s *Sim) judge(system, user string) (string, bool) {
	if !strings.Contains(system, "<question-A-") {
		return "", false
	}
	s.judged.Add(1)
	same := s.opts.Same
	if same == nil {
		same = s.guardSame
	}
	acc := s.opts.JudgeAccuracy
	if acc == 0 {
		acc = DefaultJudgeAccuracy
	}
	return judgeprompt.Naive(system, user, func(a, b string) bool {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d\x00%s\x00%s", s.opts.Seed, a, b)
		if float64(h.Sum64()>>11)/float64(1<<53) < acc {
			return same(a, b)
		}
		return !same(a, b)
	}), true
}

// guardSame is the default truth: the strict guard accepts the pair.
func (s *Sim) guardSame(a, b string) bool {
	ok, _ := s.guard(a, b)
	return ok
}

// Step is a capacity change: from After on, Capacity calls may be in flight
// (0: unlimited).
type Step struct {
	After    time.Duration
	Capacity int
}

// Stats are the counters served at GET /sim/stats. Calls are requests to a
// model endpoint (chat, completions, embeddings), whatever their answer.
type Stats struct {
	Calls        int64 `json:"calls"`
	OK           int64 `json:"ok"`
	RateLimited  int64 `json:"rate_limited"`
	Errors       int64 `json:"errors"`
	InFlight     int64 `json:"in_flight"`
	InFlightPeak int64 `json:"in_flight_peak"`
	// Abandoned counts admitted calls whose client went away before the
	// answer: the model kept working on them (and held their slot) anyway.
	Abandoned int64 `json:"abandoned"`
	// Distinct counts calls that were a request's first: calls carrying an
	// X-Request-ID seen before (a proxy's retry of the same request) are not
	// counted again. At most maxRequestIDs IDs are remembered.
	Distinct     int64 `json:"distinct"`
	PromptTokens int64 `json:"prompt_tokens"`
	OutputTokens int64 `json:"completion_tokens"`
	// Judged counts calls that were the cache's judge prompts (counted in
	// Calls and OK too): a few tokens each, not answers.
	Judged int64 `json:"judged"`
	// TokensAdmitted counts the tokens the budgets (TPM, ITPM, OTPM)
	// charged the calls they admitted, Anthropic's output corrected to what
	// the answer used.
	TokensAdmitted int64 `json:"tokens_admitted"`
	// TokenLimited counts calls refused because a token budget was spent
	// for now (counted in RateLimited too); TooLarge calls refused because
	// they can never fit a budget.
	TokenLimited int64 `json:"token_limited"`
	TooLarge     int64 `json:"too_large"`
}

// Sim is a simulated model endpoint; it is an http.Handler.
type Sim struct {
	opts Options
	mux  *http.ServeMux

	mu  sync.Mutex // guards rng
	rng *rand.Rand

	startOnce sync.Once
	start     time.Time

	inflight  atomic.Int64
	calls     atomic.Int64
	ok        atomic.Int64
	limited   atomic.Int64
	errors    atomic.Int64
	peak      atomic.Int64
	abandoned atomic.Int64
	distinct  atomic.Int64

	idMu         sync.Mutex
	ids          map[string]struct{}
	prompts      map[string]int // calls per prompt, kept when RefuseFirst > 0
	promptTokens atomic.Int64
	outputTokens atomic.Int64
	judged       atomic.Int64
	guard        func(q, c string) (bool, string)

	now                    func() time.Time // the buckets' clock: time.Now, or a test's
	tokMu                  sync.Mutex       // guards the buckets
	rpm, tpm, itpm, otpm   *bucket          // nil: no such limit
	tokensAdmitted         atomic.Int64
	tokenLimited, tooLarge atomic.Int64
}

// NewHandler returns a simulated model endpoint serving /v1/chat/completions,
// /v1/messages (Anthropic), /v1beta/models/{model}:generateContent and
// :streamGenerateContent (Gemini, also under /v1),
// /v1/completions, /v1/embeddings, /v1/models and GET /sim/stats.
func NewHandler(opts Options) http.Handler { return New(opts) }

// New is NewHandler with access to Stats.
func New(opts Options) *Sim {
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if len(opts.Models) == 0 {
		opts.Models = []string{"gpt-test"}
	}
	if opts.Dimension <= 0 {
		opts.Dimension = 64
	}
	if opts.Dist == "" {
		opts.Dist = DistExponential
	}
	if opts.Burst <= 0 {
		opts.Burst = time.Minute
	}
	s := &Sim{opts: opts, now: time.Now, rng: rand.New(rand.NewPCG(opts.Seed, 0x5eed)), guard: guard.New(guard.Options{}).Check,
		rpm: newBucket(opts.RPM, opts.Burst), tpm: newBucket(opts.TPM, opts.Burst),
		itpm: newBucket(opts.ITPM, opts.Burst), otpm: newBucket(opts.OTPM, opts.Burst)}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.model(s.chat))
	s.mux.HandleFunc("POST /v1/completions", s.model(s.completion))
	s.mux.HandleFunc("POST /v1/embeddings", s.model(s.embeddings))
	s.mux.HandleFunc("POST /v1/messages", s.model(s.messages))
	// Gemini: /{version}/models/{model}:{method}; a wildcard cannot hold
	// part of a segment, so gemini splits the model from the method.
	s.mux.HandleFunc("POST /v1beta/models/{target}", s.model(s.gemini))
	s.mux.HandleFunc("POST /v1/models/{target}", s.model(s.gemini))
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "sim: no route for "+r.Method+" "+r.URL.Path)
	})
	return s
}

// ValidDist reports whether d names a jitter distribution.
func ValidDist(d string) bool {
	return d == "" || d == DistExponential || d == DistLognormal || d == DistUniform
}

func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Stats returns a snapshot of the counters.
func (s *Sim) Stats() Stats {
	return Stats{
		Calls:        s.calls.Load(),
		OK:           s.ok.Load(),
		RateLimited:  s.limited.Load(),
		Errors:       s.errors.Load(),
		InFlight:     s.inflight.Load(),
		InFlightPeak: s.peak.Load(),
		Abandoned:    s.abandoned.Load(),
		Distinct:     s.distinct.Load(),
		PromptTokens: s.promptTokens.Load(),
		OutputTokens: s.outputTokens.Load(),
		Judged:       s.judged.Load(),

		TokensAdmitted: s.tokensAdmitted.Load(),
		TokenLimited:   s.tokenLimited.Load(),
		TooLarge:       s.tooLarge.Load(),
	}
}

// model wraps a model endpoint with admission (capacity, then the request
// and token budgets of tokens.go), error injection
// and the base latency. The slot is released before the handler returns, so
// a small answer (still buffered by net/http) never reaches the client while
// its slot looks taken: a client that respects Capacity never sees a 429.
func (s *Sim) model(h func(w http.ResponseWriter, r *http.Request, release func())) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: net/http notices that a client went away
		// only once the request body has been read to its end.
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large", "sim: request body unreadable or over 4 MiB")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.calls.Add(1)
		if s.first(r.Header.Get("X-Request-Id")) {
			s.distinct.Add(1)
		}
		if s.opts.RefuseFirst > 0 || s.opts.CountPrompts {
			if s.attempt(r.URL.Path, body) <= s.opts.RefuseFirst {
				s.limited.Add(1)
				s.refuse(w, r.URL.Path, "the model is overloaded for a moment")
				return
			}
		}
		n := s.inflight.Add(1)
		if c := s.capacity(); c > 0 && n > int64(c) {
			s.inflight.Add(-1)
			s.limited.Add(1)
			s.refuse(w, r.URL.Path, fmt.Sprintf("model is at capacity (%d requests in flight)", c))
			return
		}
		if s.opts.limited() {
			var ok bool
			if r, ok = s.admitTokens(w, r, body); !ok {
				s.inflight.Add(-1)
				return
			}
		}
		for {
			p := s.peak.Load()
			if n <= p || s.peak.CompareAndSwap(p, n) {
				break
			}
		}
		var once sync.Once
		release := func() { once.Do(func() { s.inflight.Add(-1) }) }
		fail, wait := s.draw()
		start := time.Now()
		if !sleep(r, wait) {
			// The client went away. A real provider does not notice: it
			// finishes (and bills) the answer, so the slot stays taken
			// until it would have been sent.
			s.abandoned.Add(1)
			time.AfterFunc(time.Until(start.Add(wait)), release)
			return
		}
		defer release()
		if fail {
			s.errors.Add(1)
			release()
			writeError(w, http.StatusServiceUnavailable, "server_error", "overloaded", "sim: the model is temporarily unavailable (injected error)")
			return
		}
		h(w, r, release)
	}
}

// maxRequestIDs bounds the request IDs a Sim remembers.
const maxRequestIDs = 1 << 20

// first reports whether id (a request's X-Request-ID) is new: "" is always.
func (s *Sim) first(id string) bool {
	if id == "" {
		return true
	}
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if _, seen := s.ids[id]; seen {
		return false
	}
	if s.ids == nil {
		s.ids = make(map[string]struct{})
	}
	if len(s.ids) < maxRequestIDs {
		s.ids[id] = struct{}{}
	}
	return true
}

// capacity is the limit in force now.
func (s *Sim) capacity() int {
	if len(s.opts.Steps) == 0 {
		return s.opts.Capacity
	}
	s.startOnce.Do(func() { s.start = time.Now() })
	since := time.Since(s.start)
	c := s.opts.Capacity
	for _, st := range s.opts.Steps {
		if since >= st.After {
			c = st.Capacity
		}
	}
	return c
}

// draw picks whether this call fails and its latency to the first byte.
func (s *Sim) draw() (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := s.opts.ErrorRate > 0 && s.rng.Float64() < s.opts.ErrorRate
	wait := s.opts.Latency
	if j := float64(s.opts.Jitter); j > 0 {
		switch s.opts.Dist {
		case DistLognormal:
			const sigma = 0.5
			mu := math.Log(j) - sigma*sigma/2 // mean of the draw is j
			wait += time.Duration(math.Exp(mu + sigma*s.rng.NormFloat64()))
		case DistUniform:
			wait += time.Duration(2 * j * s.rng.Float64())
		default:
			wait += time.Duration(j * s.rng.ExpFloat64())
		}
	}
	return fail, wait
}

// sleep waits d unless the client goes away first.
func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Sim) models(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, m := range s.opts.Models {
		list.Data = append(list.Data, model{ID: m, Object: "model", Created: 1700000000, OwnedBy: "breakwater-sim"})
	}
	writeJSON(w, http.StatusOK, list)
}

// Answer is the simulated model's deterministic answer to question: a canned
// sentence, chosen by a hash of the question, that contains the question.
func Answer(question string) string {
	q := strings.TrimSpace(question)
	if q == "" {
		q = "(empty question)"
	}
	h := fnv.New64a()
	h.Write([]byte(q))
	v := h.Sum64()
	return fmt.Sprintf(templates[v%uint64(len(templates))], q) + fmt.Sprintf(" [sim answer %04x]", v&0xffff)
}

var templates = []string{
	"You asked %q. The short answer is that it depends on your constraints, so start with the simplest option and measure.",
	"About %q: most people get good results by reading the official documentation first and then trying a small example.",
	"Regarding %q: there are three common approaches, and the first one is usually enough for everyday use.",
	"On %q: the answer has changed over the years, so check a recent source before you rely on it.",
	"To answer %q briefly: yes, in most cases, although a few edge cases need extra care.",
	"%q is a good question. In practice, the best approach is the one your team can maintain.",
	"For %q, the usual recommendation is to break the problem into smaller steps and solve them one at a time.",
	"Here is a simulated answer to %q: a careful, step-by-step explanation would go here in a real model.",
}

// tokens approximates a token count by words, at least 1.
func tokens(s string) int {
	if n := len(strings.Fields(s)); n > 0 {
		return n
	}
	return 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"sim: encode response","type":"server_error","code":"internal"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, code
	writeJSON(w, status, e)
}
