package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Rate limits by requests and tokens per minute (issue 37), each with its
// provider's accounting, headers and refusals:
//
//   - OpenAI (chat, completions, embeddings): RPM and TPM. A request is
//     charged at admission its input tokens plus the output it may produce
//     (max_completion_tokens or max_tokens), and the charge stands whatever
//     the answer: unsuccessful requests count towards the limit
//     (https://platform.openai.com/docs/guides/rate-limits). OpenAI's help
//     estimates a request as the larger of max_tokens and its input; the sim
//     charges their sum, as Azure OpenAI does (prompt plus max_tokens,
//     https://learn.microsoft.com/azure/ai-services/openai/how-to/quota),
//     which is never less. Every answer carries
//     x-ratelimit-{limit,remaining,reset}-{requests,tokens}; a refusal is a
//     429 whose error type is "tokens" or "requests" and whose message reads
//     "Rate limit reached for M in organization O on tokens per min (TPM):
//     Limit L, Used U, Requested R. Please try again in Xs." A request that
//     can never fit gets "Request too large for M … Limit L, Requested R",
//     also a 429 of type "tokens", with no Retry-After.
//   - Anthropic Messages: RPM, ITPM and OTPM, each a bucket replenished
//     continuously up to its limit. Input tokens are charged at admission;
//     output tokens are estimated from max_tokens at admission and corrected
//     to the tokens produced once the answer is made
//     (https://docs.anthropic.com/en/api/rate-limits). Every answer carries
//     anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-
//     {limit,remaining,reset}, the token counts remaining rounded to the
//     nearest thousand, the resets RFC 3339 times, tokens-* the most
//     restrictive of the two token limits; a refusal is 429 rate_limit_error
//     with retry-after in seconds.
//   - Gemini: RPM and TPM, the tokens being input tokens (the quota is
//     GenerateContentPaidTierInputTokensPerModelPerMinute). No rate-limit
//     header; a refusal is 429 RESOURCE_EXHAUSTED whose details are a
//     google.rpc.QuotaFailure naming the quota exceeded and a
//     google.rpc.RetryInfo whose retryDelay is the wait in whole seconds,
//     rounded down, as the API sends it
//     (https://ai.google.dev/gemini-api/docs/rate-limits).
//
// A bucket holds Options.Burst of its per-minute budget (a minute by
// default: the provider's full limit) and refills at the limit per minute.
// OpenAI enforces its limits over shorter periods than a minute ("rate
// limits are quantized"); a Burst below a minute simulates that.

// bucket is one budget: tokens or requests per minute, replenished
// continuously up to its capacity. Its level may go below zero when an
// answer turns out larger than its estimate (Anthropic's correction).
type bucket struct {
	limit    float64 // per minute
	capacity float64
	level    float64
	at       time.Time
}

func newBucket(perMinute int, burst time.Duration) *bucket {
	if perMinute <= 0 {
		return nil
	}
	// At least one: a short Burst of a small RPM still admits a request.
	c := max(float64(perMinute)*burst.Minutes(), 1)
	return &bucket{limit: float64(perMinute), capacity: c, level: c}
}

func (b *bucket) rate() float64 { return b.limit / 60 } // per second

func (b *bucket) refill(now time.Time) {
	if !b.at.IsZero() {
		b.level = min(b.capacity, b.level+b.rate()*now.Sub(b.at).Seconds())
	}
	b.at = now
}

// wait is how long until n fits: 0 now.
func (b *bucket) wait(n float64) time.Duration {
	if b.level >= n {
		return 0
	}
	return time.Duration((n - b.level) / b.rate() * float64(time.Second))
}

func (b *bucket) remaining() int { return max(0, int(math.Floor(b.level))) }

// used is what the bucket has spent of its capacity.
func (b *bucket) used() int { return int(math.Ceil(b.capacity - max(b.level, 0))) }

// reset is how long until the bucket is full again.
func (b *bucket) reset() time.Duration {
	return time.Duration((b.capacity - b.level) / b.rate() * float64(time.Second))
}

// api is the provider whose accounting a call gets.
type api int

const (
	apiOpenAI api = iota
	apiAnthropic
	apiGemini
)

func apiOf(path string) api {
	switch {
	case path == "/v1/messages":
		return apiAnthropic
	case isGemini(path):
		return apiGemini
	}
	return apiOpenAI
}

// cost is what a request asks of the budgets: its input tokens, counted as
// its answer's usage counts them, and the output it may produce (its
// max_tokens or the like; 0 when it sets none).
type cost struct {
	model   string
	in, out int
}

// costOf reads a request body for its cost. A body that does not decode
// costs nothing here: its handler refuses it.
func costOf(path string, body []byte) cost {
	switch apiOf(path) {
	case apiAnthropic:
		var req messagesRequest
		if json.Unmarshal(body, &req) != nil {
			return cost{}
		}
		in := tokens(text(req.System))
		for _, m := range req.Messages {
			in += tokens(text(m.Content))
		}
		return cost{model: req.Model, in: in, out: req.MaxTokens}
	case apiGemini:
		var req geminiRequest
		if json.Unmarshal(body, &req) != nil {
			return cost{}
		}
		model, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(path, "/v1beta/models/"), "/v1/models/"), ":")
		in, _ := geminiPrompt(req.Contents)
		return cost{model: model, in: in, out: req.GenerationConfig.MaxOutputTokens}
	}
	var req chatRequest
	if json.Unmarshal(body, &req) != nil {
		return cost{}
	}
	c := cost{model: req.Model, out: req.MaxTokens}
	if req.MaxCompletionTokens > 0 {
		c.out = req.MaxCompletionTokens
	}
	switch path {
	case "/v1/chat/completions":
		for _, m := range req.Messages {
			c.in += tokens(text(m.Content))
		}
	case "/v1/completions":
		c.in = tokens(strings.Join(texts(req.Prompt), "\n"))
	case "/v1/embeddings":
		for _, t := range texts(req.Input) {
			c.in += tokens(t)
		}
	}
	return c
}

// ticket is an admitted call's charge, kept in its request's context so
// that its handler can correct the output estimate (settle).
type ticket struct {
	api api
	out int // output tokens charged at admission
}

type ticketKey struct{}

// limited reports whether any token or request budget is set.
func (o Options) limited() bool { return o.RPM > 0 || o.TPM > 0 || o.ITPM > 0 || o.OTPM > 0 }

// admitTokens charges a call's cost to the budgets of its API, or refuses
// it in that API's shape. On admission it sets the API's rate-limit headers
// and returns the request carrying its ticket.
func (s *Sim) admitTokens(w http.ResponseWriter, r *http.Request, body []byte) (*http.Request, bool) {
	a := apiOf(r.URL.Path)
	c := costOf(r.URL.Path, body)
	if c.model == "" {
		c.model = s.opts.Models[0]
	}
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	now := s.now()
	for _, b := range []*bucket{s.rpm, s.tpm, s.itpm, s.otpm} {
		if b != nil {
			b.refill(now)
		}
	}
	// The dimensions this API charges, with the amount of each.
	type charge struct {
		b    *bucket
		n    int
		what string // the dimension, in the refusal's words
	}
	var charges []charge
	switch a {
	case apiOpenAI:
		charges = []charge{{s.rpm, 1, "requests"}, {s.tpm, c.in + c.out, "tokens"}}
	case apiAnthropic:
		charges = []charge{{s.rpm, 1, "requests"}, {s.itpm, c.in, "input tokens"}, {s.otpm, c.out, "output tokens"}}
	case apiGemini:
		charges = []charge{{s.rpm, 1, "requests"}, {s.tpm, c.in, "input tokens"}}
	}
	for _, ch := range charges {
		if ch.b != nil && float64(ch.n) > ch.b.capacity {
			s.limited.Add(1)
			s.tooLarge.Add(1)
			s.tokenHeaders(w, a, now)
			s.refuseTokens(w, a, c, ch.what, ch.b, ch.n, -1)
			return r, false
		}
	}
	for _, ch := range charges {
		if ch.b == nil {
			continue
		}
		if d := ch.b.wait(float64(ch.n)); d > 0 {
			s.limited.Add(1)
			if ch.what != "requests" {
				s.tokenLimited.Add(1)
			}
			s.tokenHeaders(w, a, now)
			s.refuseTokens(w, a, c, ch.what, ch.b, ch.n, d)
			return r, false
		}
	}
	charged := 0
	for _, ch := range charges {
		if ch.b != nil {
			ch.b.level -= float64(ch.n)
			if ch.what != "requests" {
				charged += ch.n
			}
		}
	}
	s.tokensAdmitted.Add(int64(charged))
	s.tokenHeaders(w, a, now)
	return r.WithContext(context.WithValue(r.Context(), ticketKey{}, &ticket{api: a, out: c.out})), true
}

// settle corrects an admitted Anthropic call's output charge, estimated
// from max_tokens, to the output tokens it produced (Anthropic: "adjusted
// at the end of the request to reflect the actual number of output tokens
// used"). OpenAI and Gemini keep what they charged.
func (s *Sim) settle(r *http.Request, out int) {
	t, _ := r.Context().Value(ticketKey{}).(*ticket)
	if t == nil || t.api != apiAnthropic || s.otpm == nil || t.out == out {
		return
	}
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	s.otpm.refill(s.now())
	s.otpm.level = min(s.otpm.capacity, s.otpm.level+float64(t.out-out))
	s.tokensAdmitted.Add(int64(out - t.out))
	t.out = out
}

// tokenHeaders sets the rate-limit headers of API a on w, read at now
// (with s.tokMu held). Gemini sends none.
func (s *Sim) tokenHeaders(w http.ResponseWriter, a api, now time.Time) {
	h := w.Header()
	switch a {
	case apiOpenAI:
		for _, d := range []struct {
			name string
			b    *bucket
		}{{"requests", s.rpm}, {"tokens", s.tpm}} {
			if d.b == nil {
				continue
			}
			h.Set("x-ratelimit-limit-"+d.name, strconv.Itoa(int(d.b.limit)))
			h.Set("x-ratelimit-remaining-"+d.name, strconv.Itoa(d.b.remaining()))
			h.Set("x-ratelimit-reset-"+d.name, openAIDuration(d.b.reset()))
		}
	case apiAnthropic:
		set := func(name string, b *bucket, round bool) {
			rem := b.remaining()
			if round {
				rem = int(math.Round(float64(rem)/1000)) * 1000
			}
			h.Set("anthropic-ratelimit-"+name+"-limit", strconv.Itoa(int(b.limit)))
			h.Set("anthropic-ratelimit-"+name+"-remaining", strconv.Itoa(rem))
			h.Set("anthropic-ratelimit-"+name+"-reset", now.Add(b.reset()).UTC().Format(time.RFC3339))
		}
		if s.rpm != nil {
			set("requests", s.rpm, false)
		}
		var tightest *bucket
		for _, d := range []struct {
			name string
			b    *bucket
		}{{"input-tokens", s.itpm}, {"output-tokens", s.otpm}} {
			if d.b == nil {
				continue
			}
			set(d.name, d.b, true)
			if tightest == nil || d.b.remaining() < tightest.remaining() {
				tightest = d.b
			}
		}
		if tightest != nil {
			set("tokens", tightest, true)
		}
	}
}

// refuseTokens writes API a's refusal of a request costing n of bucket b
// (dimension what), which fits after wait; a negative wait is a request
// that can never fit.
func (s *Sim) refuseTokens(w http.ResponseWriter, a api, c cost, what string, b *bucket, n int, wait time.Duration) {
	never := wait < 0
	wait = max(wait, 0).Round(time.Millisecond)
	if !never && a != apiGemini {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		w.Header().Set("retry-after-ms", strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
	}
	switch a {
	case apiOpenAI:
		unit, kind := "tokens per min (TPM)", "tokens"
		if what == "requests" {
			unit, kind = "requests per min (RPM)", "requests"
		}
		msg := fmt.Sprintf("Rate limit reached for %s in organization org-sim on %s: Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
			c.model, unit, int(b.limit), b.used(), n, wait)
		if never {
			msg = fmt.Sprintf("Request too large for %s in organization org-sim on %s: Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",
				c.model, unit, int(b.capacity), n)
		}
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"message": msg, "type": kind, "param": nil, "code": "rate_limit_exceeded"}})
	case apiAnthropic:
		msg := fmt.Sprintf("This request would exceed the rate limit for your organization (org-sim) of %d %s per minute. For details, refer to: https://docs.anthropic.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.",
			int(b.limit), what)
		if never {
			msg = fmt.Sprintf("This request (%d %s) exceeds the rate limit for your organization (org-sim) of %d %s per minute and can never be served: reduce the prompt length or the maximum tokens requested.",
				n, what, int(b.capacity), what)
		}
		writeAnthropicError(w, http.StatusTooManyRequests, "rate_limit_error", msg)
	case apiGemini:
		metric, quota := "generate_content_paid_tier_input_token_count", "GenerateContentPaidTierInputTokensPerModelPerMinute"
		if what == "requests" {
			metric, quota = "generate_content_paid_tier_requests", "GenerateRequestsPerMinutePerProjectPerModel"
		}
		msg := fmt.Sprintf("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/%s, limit: %d, model: %s", metric, int(b.limit), c.model)
		if !never {
			msg += fmt.Sprintf("\nPlease retry in %s.", protoDuration(wait))
		}
		details := []any{map[string]any{
			"@type": "type.googleapis.com/google.rpc.QuotaFailure",
			"violations": []any{map[string]any{
				"quotaMetric": "generativelanguage.googleapis.com/" + metric, "quotaId": quota,
				"quotaDimensions": map[string]any{"location": "global", "model": c.model},
				"quotaValue":      strconv.Itoa(int(b.limit)),
			}},
		}}
		if !never {
			// The API rounds the retryDelay down to whole seconds ("Please
			// retry in 10.689924287s" comes with retryDelay "10s").
			details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
				"retryDelay": protoDuration(wait.Truncate(time.Second))})
		}
		writeGeminiError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", msg, details...)
	}
}

// openAIDuration writes d as OpenAI's x-ratelimit-reset-* do: a Go-style
// duration such as "6m0s", "1.2s" or "12ms".
func openAIDuration(d time.Duration) string {
	if d >= time.Second {
		d = d.Round(10 * time.Millisecond)
	} else {
		d = d.Round(time.Millisecond)
	}
	return d.String()
}
