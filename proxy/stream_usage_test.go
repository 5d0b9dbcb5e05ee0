package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// streamBudget is a provider's token budget per minute in the stream usage
// tests, and the output a streamed request reserves from it.
const streamBudget, streamReserve = 60_000, 50_000

// budgetModel answers as api does, with the provider's rate-limit headers
// of a budget of streamBudget tokens a minute never spent: OpenAI's
// x-ratelimit-*-tokens, Anthropic's input and output token pairs.
func budgetModel(e *env, api usageAPI) {
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		h, n := w.Header(), "60000"
		if strings.HasSuffix(r.URL.Path, "/messages") {
			for _, d := range []string{"Input", "Output"} {
				h.Set("Anthropic-Ratelimit-"+d+"-Tokens-Limit", n)
				h.Set("Anthropic-Ratelimit-"+d+"-Tokens-Remaining", n)
			}
		} else {
			h.Set("X-Ratelimit-Limit-Tokens", n)
			h.Set("X-Ratelimit-Remaining-Tokens", n)
		}
		stream, _ := body["stream"].(bool)
		api.answer(w, stream, usageQuestion(body))
		return true
	}
}

// tokensLeft is what /stats says is left of fake/gpt-test's budget of limit.
func tokensLeft(t *testing.T, e *env, limit string) float64 {
	t.Helper()
	var st Stats
	if err := json.Unmarshal([]byte(e.get("/stats").body), &st); err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Models {
		for _, tg := range m.Targets {
			if tg.Name == "fake/gpt-test" {
				if _, ok := tg.TokenLimit[limit]; !ok {
					t.Fatalf("fake/gpt-test learnt no %s budget: %v", limit, tg.TokenLimit)
				}
				return tg.TokensLeft[limit]
			}
		}
	}
	t.Fatal("no target fake/gpt-test in /stats")
	return 0
}

// tokensLeftAtLeast waits until the target's budget for limit has at
// least want tokens left, or 10 s pass, and returns what it has: the
// stream's usage reconciles the budget as its pump winds up, which may come
// just after the client read the last event. Without the reconciliation
// the budget refills at 1,000 tokens a second, 10,000 in the wait.
func tokensLeftAtLeast(t *testing.T, e *env, limit string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := tokensLeft(t, e, limit)
		if left >= want || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A streamed answer's usage reaches the lane when the stream ends, as a
// JSON answer's does; against OpenAI, which keeps the max_tokens a request
// reserved whatever it used, the reservation stays spent: a stream that
// reserved 50,000 output tokens of a 60,000 budget and used a few dozen
// leaves the budget spent but for its refill (1,000 tokens a second). It
// gave the rest back before, and the lane sent what the provider refused
// (the token peak's upstream 429s). A first JSON request teaches the lane
// the budget from the headers. (TestStreamUsageReconcilesAnthropic checks
// the give-back a stream's usage brings where the provider corrects.)
func TestStreamUsageReconcilesOpenAI(t *testing.T) {
	e := newEnv(t, envOptions{})
	budgetModel(e, usageAPIs[0]) // Chat: 11 in, 22 out
	c := openai.NewClient(option.WithBaseURL(e.front.URL+"/v1/"), option.WithAPIKey("sk-sdk"), option.WithMaxRetries(0))
	ask := func(q string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model: "gpt-test", MaxCompletionTokens: openai.Int(streamReserve),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)},
		}
	}
	if _, err := c.Chat.Completions.New(context.Background(), ask("teach the budget")); err != nil {
		t.Fatal(err)
	}
	st := c.Chat.Completions.NewStreaming(context.Background(), ask("a streamed question"),
		option.WithJSONSet("stream_options", map[string]any{"include_usage": true}))
	usage := streamedUsage(t, st)
	if usage.CompletionTokens != 22 {
		t.Fatalf("streamed usage %+v, want the provider's 22 output tokens", usage)
	}
	e.waitStreams()
	// Given back, 49,967 would be left at once; kept, 10,000 and its
	// refill, which takes 25 s to reach 35,000.
	if left := tokensLeft(t, e, "tokens"); left > streamBudget-streamReserve/2 {
		t.Errorf("tokens left after the stream = %.0f of %d, want the %d reserved kept spent, as OpenAI keeps it", left, streamBudget, streamReserve)
	}
}

// TestStreamUsageReconcilesAnthropic: the same with Messages, whose stream
// says its output in message_delta's usage, against Anthropic's output
// tokens per minute.
func TestStreamUsageReconcilesAnthropic(t *testing.T) {
	e := newEnv(t, envOptions{})
	budgetModel(e, usageAPIs[1]) // Messages: 35 in, 17 out
	c := anthropic.NewClient(aoption.WithBaseURL(e.front.URL), aoption.WithAPIKey("sk-ant-sdk"), aoption.WithMaxRetries(0))
	ask := func(q string, reserve int64) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{
			Model: "gpt-test", MaxTokens: reserve,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))},
		}
	}
	// The SDK asks for a stream past a few thousand output tokens.
	if _, err := c.Messages.New(context.Background(), ask("teach the budget", 100)); err != nil {
		t.Fatal(err)
	}
	stream := c.Messages.NewStreaming(context.Background(), ask("a streamed question", streamReserve))
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if acc.Usage.OutputTokens != 17 {
		t.Fatalf("streamed usage %+v, want the provider's 17 output tokens", acc.Usage)
	}
	e.waitStreams()
	if left := tokensLeftAtLeast(t, e, "output_tokens", streamBudget-streamReserve/5); left < streamBudget-streamReserve/5 {
		t.Errorf("output tokens left after the stream = %.0f of %d, want the %d reserved given back but the 17 used", left, streamBudget, streamReserve)
	}
}
