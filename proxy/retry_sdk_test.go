package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// A model overloaded for a moment refuses a prompt twice, asking for a
// second each time (529 + retry-after, 429 + Retry-After, Gemini's
// RetryInfo), then answers it. A lone request is retried as a good client
// retries: once the wait it was asked for has passed, within its attempts
// and deadline, with the official SDK (its own retries off) seeing only the
// answer. These run the sidecar on its defaults, and on retry.deadline =
// "8s", max_attempts = 3.

// retrySetups are the retry settings the tests run under: the library
// defaults (what a config without [retry] gets), and an 8 s deadline.
var retrySetups = []struct {
	name  string
	retry upstream.RetryPolicy
}{
	{"default deadline", upstream.RetryPolicy{}},
	{"8s deadline", upstream.RetryPolicy{MaxAttempts: 3, Deadline: 8 * time.Second}},
}

// onDefaults sets the caller to its defaults (the test envs' tight queues
// and fast backoffs are for other tests) with retry as the retry policy.
func onDefaults(retry upstream.RetryPolicy) func(*upstream.Options) {
	return func(o *upstream.Options) {
		o.Retry = retry
		for i := range o.Upstreams {
			o.Upstreams[i].MaxConcurrency, o.Upstreams[i].MaxQueue = 0, 0
		}
	}
}

// modelWork is how long the loopback models take to answer (a refusal
// comes at once), as the demo's simulated model does: the lane learns its
// time per answer from the warm-up.
const modelWork = 300 * time.Millisecond

// warmUp is the prefix of the prompts a model answers before its storm:
// the lane has learnt what an answer takes, as in a sidecar that has been
// serving before the model was overloaded for a moment.
const warmUp = "Warm-up question "

// refusals is a loopback model's memory of a storm: it refuses each
// prompt's first n attempts (every attempt when n < 0), except warm-up
// prompts, takes modelWork to answer, and records when every attempt came.
type refusals struct {
	n  int
	mu sync.Mutex
	at map[string][]time.Time
}

func newRefusals(n int) *refusals { return &refusals{n: n, at: map[string][]time.Time{}} }

// refuse records an attempt at prompt and reports whether to refuse it.
func (r *refusals) refuse(prompt string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[prompt] = append(r.at[prompt], time.Now())
	refuse := !strings.HasPrefix(prompt, warmUp) && (r.n < 0 || len(r.at[prompt]) <= r.n)
	r.mu.Unlock()
	if !refuse {
		time.Sleep(modelWork) // the model's time to answer, not synchronisation
	}
	r.mu.Lock()
	return refuse
}

// warm sends two warm-up prompts through ask, one after the other.
func warm(t *testing.T, ask func(q string) error) {
	t.Helper()
	for i := range 2 {
		if err := ask(fmt.Sprintf("%s%d", warmUp, i)); err != nil {
			t.Fatalf("warm-up: %v", err)
		}
	}
}

func (r *refusals) times(prompt string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at[prompt]...)
}

// checkRetried checks that prompt, whose attempts came at at, was answered
// on its third attempt, each attempt at least 0.9 s after the one before
// (the second asked for), and the answer in at most 3 s.
func checkRetried(t *testing.T, prompt string, at []time.Time, took time.Duration) {
	t.Helper()
	if len(at) != 3 {
		t.Errorf("%q: the upstream saw %d attempts, want 3", prompt, len(at))
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 900*time.Millisecond {
			t.Errorf("%q: attempt %d came %s after the refusal that asked for 1s", prompt, i+1, gap)
		}
	}
	if took > 3*time.Second {
		t.Errorf("%q: answered after %s, want at most 3s (two 1 s waits and three answers)", prompt, took.Round(time.Millisecond))
	}
}

// anthropicRefusals are the two refusals a Messages upstream gives: 529
// overloaded_error, and 429 rate_limit_error with the rate-limit headers
// (https://docs.anthropic.com/en/api/rate-limits), each asking for 1 s.
var anthropicRefusals = []struct {
	name   string
	refuse func(w http.ResponseWriter)
}{
	{"529 overloaded_error", func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 529, map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
	}},
	{"429 rate_limit_error", func(w http.ResponseWriter) {
		h := w.Header()
		h.Set("Retry-After", "1")
		h.Set("Anthropic-Ratelimit-Requests-Limit", "50")
		h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		h.Set("Anthropic-Ratelimit-Requests-Reset", time.Now().Add(time.Second).UTC().Format(time.RFC3339))
		h.Set("Anthropic-Ratelimit-Tokens-Limit", "40000")
		h.Set("Anthropic-Ratelimit-Tokens-Remaining", "39000")
		writeJSON(w, 429, map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error",
			"message": "Number of request tokens has exceeded your per-minute rate limit"}})
	}},
}

func TestRetrySDKAnthropicRefusedTwice(t *testing.T) {
	for _, setup := range retrySetups {
		for _, ref := range anthropicRefusals {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", setup.name, ref.name, stream), func(t *testing.T) {
					t.Parallel()
					ce := newClaudeEnv(t, envOptions{caller: onDefaults(setup.retry)})
					var storm atomic.Bool
					ce.a.overload = func(attempt int) bool { return storm.Load() && attempt <= 2 }
					ce.a.refuse, ce.a.work = ref.refuse, modelWork
					client := ce.sdk("sk-ant-1", true)
					warm(t, func(q string) error {
						_, err := client.Messages.New(context.Background(), question("claude-test", q))
						return err
					})
					storm.Store(true)
					const q = "Is the model back?"
					start := time.Now()
					var text string
					if stream {
						acc, err := accumulate(t, client, question("claude-test", q))
						if err != nil {
							t.Fatalf("stream: %v", err)
						}
						if len(acc.Content) > 0 {
							text = acc.Content[0].Text
						}
					} else {
						m, err := client.Messages.New(context.Background(), question("claude-test", q))
						if err != nil {
							t.Fatalf("request: %v", err)
						}
						text = m.Content[0].Text
					}
					took := time.Since(start)
					if text != "answer to: "+q {
						t.Errorf("answered %q, want the third attempt's answer", text)
					}
					var at []time.Time
					for _, req := range ce.a.requests() {
						if q, _ := claudeTurns(req.body); !strings.HasPrefix(q, warmUp) {
							at = append(at, req.at)
						}
					}
					checkRetried(t, q, at, took)
					if n := ce.b.messageCalls(); n != 0 {
						t.Errorf("the fallback saw %d requests, want none", n)
					}
				})
			}
		}
	}
}

// geminiRetryIn1s is Gemini's per-minute RESOURCE_EXHAUSTED asking for 1 s
// in RetryInfo (https://ai.google.dev/gemini-api/docs/rate-limits).
var geminiRetryIn1s = strings.Replace(geminiPerMinute, `"21.5s"`, `"1s"`, 1)

func TestRetrySDKGeminiRefusedTwice(t *testing.T) {
	for _, setup := range retrySetups {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", setup.name, stream), func(t *testing.T) {
				t.Parallel()
				g, r := newRefusingGemini(t, setup.retry, 2)
				warm(t, func(q string) error { _, err := g.ask(false, q); return err })
				const q = "Is Flash back?"
				start := time.Now()
				text, err := g.ask(stream, q)
				took := time.Since(start)
				if err != nil || text != geminiFlash+" says: "+q {
					t.Fatalf("answered %q, %v; want the third attempt's answer", text, err)
				}
				checkRetried(t, q, r.times(q), took)
			})
		}
	}
}

// Four prompts at once, each refused twice: a handful of retried requests
// is not a crowd, and each is retried when its RetryInfo allows.
func TestRetrySDKGeminiFourAtOnce(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			g, r := newRefusingGemini(t, upstream.RetryPolicy{}, 2)
			warm(t, func(q string) error { _, err := g.ask(false, q); return err })
			prompts := []string{"Name a red fruit", "Which planet is largest", "Translate hello into Spanish", "Sum of two and three"}
			took := make([]time.Duration, len(prompts))
			errs := make([]error, len(prompts))
			start := time.Now()
			var wg sync.WaitGroup
			for i, q := range prompts {
				wg.Go(func() {
					text, err := g.ask(stream, q)
					if err == nil && text != geminiFlash+" says: "+q {
						err = fmt.Errorf("answered %q", text)
					}
					took[i], errs[i] = time.Since(start), err
				})
			}
			wg.Wait()
			for i, q := range prompts {
				if errs[i] != nil {
					t.Errorf("%q: %v", q, errs[i])
				}
				if took[i] > 5*time.Second {
					var at []string
					for _, a := range r.times(q) {
						at = append(at, a.Sub(start).Round(time.Millisecond).String())
					}
					t.Errorf("%q: answered after %s, want within 5s (attempts at %v)", q, took[i].Round(time.Millisecond), at)
				}
				if n := len(r.times(q)); n != 3 {
					t.Errorf("%q: %d attempts, want 3", q, n)
				}
			}
		})
	}
}

// newRefusingGemini is a sidecar on defaults (with retry) whose Gemini
// upstream refuses each prompt's first n attempts with RESOURCE_EXHAUSTED
// and a RetryInfo of 1 s.
func newRefusingGemini(t *testing.T, retry upstream.RetryPolicy, n int) (*geminiEnv, *refusals) {
	t.Helper()
	g := newGeminiEnv(t, envOptions{caller: onDefaults(retry)})
	r := newRefusals(n)
	g.api.handle = func(w http.ResponseWriter, c geminiCall, _ int) bool {
		if c.method != "generateContent" && c.method != "streamGenerateContent" || !r.refuse(c.lastUser()) {
			return false
		}
		geminiRefuse(w, 429, geminiRetryIn1s)
		return true
	}
	return g, r
}

// ask sends q to Flash through the SDK, streamed or not, and returns the
// answer's text.
func (g *geminiEnv) ask(stream bool, q string) (string, error) {
	c := g.client("key-a")
	if stream {
		text, _, _, err := g.stream(c, geminiFlash, q)
		return text, err
	}
	text, _, err := g.generate(c, geminiFlash, q)
	return text, err
}

func TestRetrySDKOpenAIRefusedTwice(t *testing.T) {
	for _, setup := range retrySetups {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", setup.name, stream), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, envOptions{caller: onDefaults(setup.retry)})
				r := newRefusals(2)
				e.model.HandleFunc = func(w http.ResponseWriter, _ *http.Request, body map[string]any) bool {
					if !r.refuse(lastUser(body)) {
						return false
					}
					openAIRateLimited(w)
					return true
				}
				warm(t, func(q string) error { _, err := openAIAsk(e, false, q); return err })
				const q = "Is GPT back?"
				start := time.Now()
				text, err := openAIAsk(e, stream, q)
				took := time.Since(start)
				if err != nil || text != "answer to: "+q {
					t.Fatalf("answered %q, %v; want the third attempt's answer", text, err)
				}
				checkRetried(t, q, r.times(q), took)
			})
		}
	}
}

// openAIRateLimited is OpenAI's 429: Retry-After and the x-ratelimit-*
// headers of a spent request budget
// (https://platform.openai.com/docs/guides/rate-limits).
func openAIRateLimited(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Retry-After", "1")
	h.Set("X-Ratelimit-Remaining-Requests", "0")
	h.Set("X-Ratelimit-Reset-Requests", "1s")
	writeJSON(w, 429, map[string]any{"error": map[string]any{"message": "Rate limit reached for requests",
		"type": "requests", "param": nil, "code": "rate_limit_exceeded"}})
}

// openAIAsk sends q as a chat completion through the official SDK (its own
// retries off), streamed or not, and returns the answer's text.
func openAIAsk(e *env, stream bool, q string, opts ...oaioption.RequestOption) (string, error) {
	c := openai.NewClient(append([]oaioption.RequestOption{oaioption.WithBaseURL(e.front.URL + "/v1/"), oaioption.WithAPIKey("sk-retry"),
		oaioption.WithMaxRetries(0)}, opts...)...)
	params := openai.ChatCompletionNewParams{Model: "gpt-test", Temperature: openai.Float(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}}
	if !stream {
		cc, err := c.Chat.Completions.New(context.Background(), params)
		if err != nil {
			return "", err
		}
		return cc.Choices[0].Message.Content, nil
	}
	st := c.Chat.Completions.NewStreaming(context.Background(), params)
	defer st.Close()
	var b strings.Builder
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 {
			b.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	return b.String(), st.Err()
}

// When every target refuses every attempt, the client gets the provider's
// refusal (Anthropic's 529 overloaded_error; OpenAI's clients the 503 the
// upstream said), with Retry-After, once the attempts are spent: never a
// 504 timeout_error, and well within the deadline.
func TestRetrySDKEveryTargetRefuses(t *testing.T) {
	for _, setup := range retrySetups {
		deadline := cmp.Or(setup.retry.Deadline, upstream.DefaultDeadline)
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("anthropic/%s/stream=%v", setup.name, stream), func(t *testing.T) {
				t.Parallel()
				ce := newClaudeEnv(t, envOptions{caller: onDefaults(setup.retry), proxy: func(o *Options) { o.StaleIfError = false }})
				var storm atomic.Bool
				ce.a.overload = func(int) bool { return storm.Load() }
				ce.b.overload = func(int) bool { return storm.Load() }
				ce.a.retryAfter, ce.b.retryAfter = "1", "1"
				ce.a.work, ce.b.work = modelWork, modelWork
				client := ce.sdk("sk-ant-1", true)
				warm(t, func(q string) error {
					_, err := client.Messages.New(context.Background(), question("claude-test", q))
					return err
				})
				storm.Store(true)
				calls := ce.a.messageCalls() + ce.b.messageCalls()
				start := time.Now()
				var err error
				if stream {
					_, err = accumulate(t, client, question("claude-test", "Anyone there?"))
				} else {
					_, err = client.Messages.New(context.Background(), question("claude-test", "Anyone there?"))
				}
				took := time.Since(start)
				var apiErr *anthropic.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("err = %v, want an *anthropic.Error", err)
				}
				if apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" {
					t.Errorf("status %d type %q, want 529 overloaded_error (%s)", apiErr.StatusCode, apiErr.Type(), apiErr.RawJSON())
				}
				if apiErr.Response == nil || apiErr.Response.Header.Get("Retry-After") == "" {
					t.Error("no Retry-After with the refusal")
				}
				if n := ce.a.messageCalls() + ce.b.messageCalls() - calls; n != 6 {
					t.Errorf("the upstreams saw %d attempts, want 3 each", n)
				}
				if took >= deadline {
					t.Errorf("refused after %s, the whole %s deadline", took.Round(time.Millisecond), deadline)
				}
			})
			t.Run(fmt.Sprintf("openai/%s/stream=%v", setup.name, stream), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, envOptions{caller: onDefaults(setup.retry), proxy: func(o *Options) { o.StaleIfError = false }})
				e.model.HandleFunc = func(w http.ResponseWriter, _ *http.Request, body map[string]any) bool {
					if strings.HasPrefix(lastUser(body), warmUp) {
						time.Sleep(modelWork) // the model's time to answer, not synchronisation
						return false
					}
					w.Header().Set("Retry-After", "1")
					writeJSON(w, 503, map[string]any{"error": map[string]any{"message": "The engine is currently overloaded, please try again later",
						"type": "server_error", "param": nil, "code": nil}})
					return true
				}
				warm(t, func(q string) error { _, err := openAIAsk(e, false, q); return err })
				calls := e.model.calls.Load()
				start := time.Now()
				_, err := openAIAsk(e, stream, "Anyone there?")
				took := time.Since(start)
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("err = %v, want an *openai.Error", err)
				}
				if apiErr.StatusCode != 503 {
					t.Errorf("status %d, want the upstream's 503 (%s)", apiErr.StatusCode, apiErr.RawJSON())
				}
				if apiErr.Response == nil || apiErr.Response.Header.Get("Retry-After") == "" {
					t.Error("no Retry-After with the refusal")
				}
				if n := e.model.calls.Load() - calls; n != 3 {
					t.Errorf("the upstream saw %d attempts, want 3", n)
				}
				if took >= deadline {
					t.Errorf("refused after %s, the whole %s deadline", took.Round(time.Millisecond), deadline)
				}
			})
		}
	}
}
