package sim

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"
)

// fakeClock is the buckets' clock in these tests: time moves only when the
// test says, so a budget refills by exactly what the test expects.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// limitedSim serves a sim with opts on a fake clock that starts at
// 2026-01-01T00:00:00Z.
func limitedSim(t *testing.T, opts Options) (*Sim, *fakeClock, string) {
	t.Helper()
	s := New(opts)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.now = clock.now
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, clock, srv.URL
}

// words is how many completion tokens the sim reports for q's answer.
func words(q string) int { return len(strings.Fields(Answer(q))) }

// OpenAI's accounting, read by the official SDK: input plus max tokens
// charged at admission (usage reporting the input charged), the
// x-ratelimit-* headers, the TPM refusal with its figures and wait, the
// request admitted once the wait has passed, "Request too large" for a
// request above the limit, and a failed call still charged.
func TestTokensOpenAI(t *testing.T) {
	s, clock, url := limitedSim(t, Options{TPM: 1000})
	c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	ask := func(q string, maxTokens int64) (*openai.ChatCompletion, *http.Response, *openai.Error) {
		t.Helper()
		var resp *http.Response
		cc, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "gpt-test", MaxCompletionTokens: openai.Int(maxTokens),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)},
		}, option.WithResponseInto(&resp))
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			return nil, apiErr.Response, apiErr
		}
		if err != nil {
			t.Fatal(err)
		}
		return cc, resp, nil
	}
	header := func(h http.Header, names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, h.Get(n))
		}
		return out
	}
	tokenHeaders := []string{"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"}

	const q1 = "How do tides work?" // 4 tokens
	cc, resp, apiErr := ask(q1, 300)
	if apiErr != nil {
		t.Fatalf("first call refused: %v", apiErr)
	}
	// 304 of 1000 spent; the minute's budget refills 304 in 18.24 s.
	if got, want := header(resp.Header, tokenHeaders...), []string{"1000", "696", "18.24s"}; !slices.Equal(got, want) {
		t.Errorf("headers %s = %q, want %q", tokenHeaders, got, want)
	}
	if cc.Usage.PromptTokens != 4 || cc.Usage.CompletionTokens != int64(words(q1)) {
		t.Errorf("usage %d/%d, want the 4 input tokens charged and the %d generated", cc.Usage.PromptTokens, cc.Usage.CompletionTokens, words(q1))
	}
	if got := s.Stats().TokensAdmitted; got != 304 {
		t.Errorf("tokens admitted %d, want 304 (input + max_completion_tokens)", got)
	}

	const q2 = "Why is the sea salty?" // 5 tokens: 705 > 696
	_, _, apiErr = ask(q2, 700)
	if apiErr == nil {
		t.Fatal("second call answered, want it refused: 705 tokens with 696 left")
	}
	// 9 tokens short at 1000 a minute: 540 ms.
	want := "Rate limit reached for gpt-test in organization org-sim on tokens per min (TPM): Limit 1000, Used 304, Requested 705. Please try again in 540ms."
	if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != "tokens" || apiErr.Code != "rate_limit_exceeded" || !strings.HasPrefix(apiErr.Message, want) {
		t.Errorf("refusal %d %s/%s %q, want 429 tokens/rate_limit_exceeded %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message, want)
	}
	if got := header(apiErr.Response.Header, "Retry-After", "retry-after-ms", "x-ratelimit-remaining-tokens"); !slices.Equal(got, []string{"1", "540", "696"}) {
		t.Errorf("refusal headers Retry-After, retry-after-ms, remaining = %q, want 1, 540, 696", got)
	}
	clock.add(540 * time.Millisecond)
	if _, resp, apiErr = ask(q2, 700); apiErr != nil {
		t.Fatalf("after the wait it asked for, refused again: %v", apiErr)
	}
	if got := resp.Header.Get("x-ratelimit-remaining-tokens"); got != "0" {
		t.Errorf("remaining %q after spending it all, want 0", got)
	}

	clock.add(time.Minute)
	_, _, apiErr = ask(q1, 997) // 1001 tokens: never fits
	want = "Request too large for gpt-test in organization org-sim on tokens per min (TPM): Limit 1000, Requested 1001."
	if apiErr == nil || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != "tokens" || !strings.HasPrefix(apiErr.Message, want) {
		t.Fatalf("a request above the limit: %v, want 429 tokens %q", apiErr, want)
	}
	if ra := apiErr.Response.Header.Get("Retry-After"); ra != "" {
		t.Errorf("a request that can never fit asks to retry after %q", ra)
	}
	if st := s.Stats(); st.TokensAdmitted != 1009 || st.TokenLimited != 1 || st.TooLarge != 1 || st.RateLimited != 2 {
		t.Errorf("stats %+v, want 1009 tokens admitted, 1 refused for tokens, 1 too large, 2 rate limited", st)
	}

	// A call that fails after admission is charged all the same.
	failing, _, furl := limitedSim(t, Options{TPM: 1000, ErrorRate: 1})
	if resp, b := post(t, furl+"/v1/chat/completions", `{"model":"gpt-test","max_tokens":100,"messages":[{"role":"user","content":"How do tides work?"}]}`); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d %s, want the injected 503", resp.StatusCode, b)
	}
	if got := failing.Stats().TokensAdmitted; got != 104 {
		t.Errorf("a failed call: %d tokens admitted, want its 104", got)
	}

	// Without limits there is no such header (today's scenarios).
	_, _, plain := limitedSim(t, Options{})
	if resp, _ := post(t, plain+"/v1/chat/completions", chatBody("How do tides work?", false)); resp.Header.Get("x-ratelimit-limit-tokens") != "" {
		t.Errorf("no limit set, yet headers %v", resp.Header)
	}
}

// OpenAI's requests-per-minute refusal: type "requests", RPM figures.
func TestTokensOpenAIRequests(t *testing.T) {
	_, _, url := limitedSim(t, Options{RPM: 1})
	resp, b := post(t, url+"/v1/chat/completions", chatBody("How do tides work?", false))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("x-ratelimit-limit-requests") != "1" || resp.Header.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("first call %d %s, headers %v; want 200 with 1 request a minute and 0 left", resp.StatusCode, b, resp.Header)
	}
	c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Why?")},
	})
	var apiErr *openai.Error
	want := "Rate limit reached for gpt-test in organization org-sim on requests per min (RPM): Limit 1, Used 1, Requested 1. Please try again in 1m0s."
	if !errors.As(err, &apiErr) || apiErr.Type != "requests" || !strings.HasPrefix(apiErr.Message, want) || apiErr.Response.Header.Get("Retry-After") != "60" {
		t.Fatalf("second call: %v, want 429 requests %q with Retry-After 60", err, want)
	}
}

// Anthropic's accounting, read by the official SDK: input and output
// buckets, the output estimated from max_tokens and corrected to the
// answer's once made (so a second call fits that the estimate alone would
// refuse), the anthropic-ratelimit-* headers with token counts rounded to
// the thousand and RFC 3339 resets, 429 rate_limit_error with retry-after,
// and none for a request above the limit.
func TestTokensAnthropic(t *testing.T) {
	s, _, url := limitedSim(t, Options{ITPM: 10000, OTPM: 2000})
	c := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
	ask := func(q string, maxTokens int64) (*anthropic.Message, *http.Response, *anthropic.Error) {
		t.Helper()
		var resp *http.Response
		msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: "claude-test", MaxTokens: maxTokens,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))},
		}, aoption.WithResponseInto(&resp))
		var apiErr *anthropic.Error
		if errors.As(err, &apiErr) {
			return nil, apiErr.Response, apiErr
		}
		if err != nil {
			t.Fatal(err)
		}
		return msg, resp, nil
	}
	// 5 and 6 input tokens: the words, and the sim counts an absent system
	// prompt as one.
	const q1, q2 = "How do tides work?", "Why is the sea salty?"
	msg, resp, apiErr := ask(q1, 1600)
	if apiErr != nil {
		t.Fatalf("first call refused: %v", apiErr)
	}
	// At admission: 400 output tokens left (0 rounded), 9995 input (10000
	// rounded); the output bucket refills 1600 in 48 s.
	for name, want := range map[string]string{
		"anthropic-ratelimit-output-tokens-limit":     "2000",
		"anthropic-ratelimit-output-tokens-remaining": "0",
		"anthropic-ratelimit-output-tokens-reset":     "2026-01-01T00:00:48Z",
		"anthropic-ratelimit-input-tokens-limit":      "10000",
		"anthropic-ratelimit-input-tokens-remaining":  "10000",
		"anthropic-ratelimit-input-tokens-reset":      "2026-01-01T00:00:00Z",
		"anthropic-ratelimit-tokens-limit":            "2000", // the most restrictive
		"anthropic-ratelimit-tokens-remaining":        "0",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if msg.Usage.InputTokens != 5 || msg.Usage.OutputTokens != int64(words(q1)) {
		t.Errorf("usage %d/%d, want the 5 input tokens charged and the %d generated", msg.Usage.InputTokens, msg.Usage.OutputTokens, words(q1))
	}
	// The estimate alone leaves 400: only the correction to the answer's
	// output makes room for another 1600.
	if _, _, apiErr := ask(q2, 1600); apiErr != nil {
		t.Fatalf("second call refused (%v): the output estimate was not corrected after the first answer", apiErr)
	}
	if got, want := s.Stats().TokensAdmitted, int64(5+words(q1)+6+words(q2)); got != want {
		t.Errorf("tokens admitted %d, want %d (input plus the output used)", got, want)
	}
	_, _, apiErr = ask(q1, 1999)
	if apiErr == nil || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type() != "rate_limit_error" {
		t.Fatalf("a call above the output left: %v, want 429 rate_limit_error", apiErr)
	}
	if h := apiErr.Response.Header; h.Get("retry-after") == "" || h.Get("anthropic-ratelimit-output-tokens-limit") != "2000" {
		t.Errorf("refusal headers %v, want retry-after and the limits", h)
	}
	if !strings.Contains(apiErr.Error(), "2000 output tokens per minute") {
		t.Errorf("refusal %q does not name the output limit", apiErr.Error())
	}
	_, _, apiErr = ask(q1, 2001)
	if apiErr == nil || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Response.Header.Get("retry-after") != "" {
		t.Fatalf("a request above the limit: %v, want 429 without retry-after", apiErr)
	}
	if st := s.Stats(); st.TokenLimited != 1 || st.TooLarge != 1 {
		t.Errorf("stats %+v, want 1 refused for tokens and 1 too large", st)
	}
}

// geminiRefusal is what the Gemini SDK shows of a 429: its status and the
// quota and retry delay of its details.
type geminiRefusal struct {
	code               int
	status, quotaID    string
	retryDelay, metric string
}

func askGemini(t *testing.T, url, q string) (*genai.GenerateContentResponse, *geminiRefusal) {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "gm-test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url, RetryOptions: &genai.HTTPRetryOptions{Attempts: genai.Ptr[int32](1)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text(q), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) {
		if err != nil {
			t.Fatal(err)
		}
		return resp, nil
	}
	r := &geminiRefusal{code: apiErr.Code, status: apiErr.Status}
	for _, d := range apiErr.Details {
		switch d["@type"] {
		case "type.googleapis.com/google.rpc.RetryInfo":
			r.retryDelay, _ = d["retryDelay"].(string)
		case "type.googleapis.com/google.rpc.QuotaFailure":
			vs, _ := d["violations"].([]any)
			for _, v := range vs {
				m, _ := v.(map[string]any)
				r.quotaID, _ = m["quotaId"].(string)
				r.metric, _ = m["quotaMetric"].(string)
			}
		}
	}
	return nil, r
}

// Gemini's accounting, read by the official SDK: input tokens per minute,
// no rate-limit header, 429 RESOURCE_EXHAUSTED naming the input-token quota
// in a QuotaFailure with the wait in RetryInfo (whole seconds), the call
// admitted once it has passed, no RetryInfo for a prompt above the limit,
// and the requests quota named for RPM.
func TestTokensGemini(t *testing.T) {
	s, clock, url := limitedSim(t, Options{TPM: 100})
	q := strings.Repeat("tide ", 60) + "why?" // 61 tokens
	resp, r := askGemini(t, url, q)
	if r != nil {
		t.Fatalf("first call refused: %+v", *r)
	}
	if u := resp.UsageMetadata; u == nil || u.PromptTokenCount != 61 {
		t.Errorf("usage %+v, want the 61 prompt tokens charged", resp.UsageMetadata)
	}
	if h := resp.SDKHTTPResponse; h != nil {
		for name := range h.Headers {
			if strings.Contains(strings.ToLower(name), "ratelimit") {
				t.Errorf("Gemini sends no rate-limit header; got %s", name)
			}
		}
	}
	// 22 tokens short at 100 a minute: 13.2 s, sent as 13s.
	_, r = askGemini(t, url, q)
	want := geminiRefusal{code: 429, status: "RESOURCE_EXHAUSTED", quotaID: "GenerateContentPaidTierInputTokensPerModelPerMinute",
		retryDelay: "13s", metric: "generativelanguage.googleapis.com/generate_content_paid_tier_input_token_count"}
	if r == nil || *r != want {
		t.Fatalf("second call: %+v, want %+v", r, want)
	}
	clock.add(12 * time.Second)
	if _, r = askGemini(t, url, q); r == nil || r.retryDelay != "1s" {
		t.Fatalf("1.2 s before the wait ends: %+v, want refused with retryDelay 1s (whole seconds, rounded down)", r)
	}
	clock.add(1200 * time.Millisecond)
	if _, r = askGemini(t, url, q); r != nil {
		t.Fatalf("after the wait: refused %+v", *r)
	}
	clock.add(time.Minute)
	_, r = askGemini(t, url, strings.Repeat("tide ", 101)) // 101 tokens: never fits
	if r == nil || r.code != 429 || r.quotaID != want.quotaID || r.retryDelay != "" {
		t.Fatalf("a prompt above the limit: %+v, want 429 naming the quota, without RetryInfo", r)
	}
	if st := s.Stats(); st.TokensAdmitted != 122 || st.TokenLimited != 2 || st.TooLarge != 1 {
		t.Errorf("stats %+v, want 122 tokens admitted, 2 refused for tokens, 1 too large", st)
	}

	_, _, url = limitedSim(t, Options{RPM: 1})
	askGemini(t, url, "How do tides work?")
	_, r = askGemini(t, url, "How do tides work?")
	if r == nil || r.quotaID != "GenerateRequestsPerMinutePerProjectPerModel" || r.retryDelay != "60s" {
		t.Fatalf("second call in a minute of 1 request: %+v, want the requests quota and retryDelay 60s", r)
	}
}
