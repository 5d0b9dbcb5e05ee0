package proxy

import (
	"context"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestTokensSavedSeenByOfficialSDK: an app on the official OpenAI SDK that
// sums usage sees the provider's usage on a hit as on the miss (the answer
// is described as it is), and reads what the hit saved from
// X-Breakwater-Tokens-Saved: what it subtracts for its own bill.
func TestTokensSavedSeenByOfficialSDK(t *testing.T) {
	e := newEnv(t, envOptions{})
	api := usageAPIs[0] // Chat: 11 in, 22 out
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		stream, _ := body["stream"].(bool)
		api.answer(w, stream, usageQuestion(body))
		return true
	}
	c := openai.NewClient(option.WithBaseURL(e.front.URL+"/v1/"), option.WithAPIKey("sk-sdk"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:       "gpt-test",
		Temperature: openai.Float(0),
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("How many tokens does a hit save?")},
	}
	var saved []string
	for i := range 2 {
		var raw *http.Response
		cc, err := c.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if cc.Usage.PromptTokens != 11 || cc.Usage.CompletionTokens != 22 {
			t.Errorf("request %d: usage %d/%d, want the provider's 11/22", i, cc.Usage.PromptTokens, cc.Usage.CompletionTokens)
		}
		saved = append(saved, raw.Header.Get(HeaderCache)+" "+raw.Header.Get(HeaderTokensSaved))
	}
	if saved[0] != OutcomeMiss+" " || saved[1] != OutcomeHitExact+" 11,22" {
		t.Errorf("outcome and tokens saved = %q, want [%q %q]", saved, OutcomeMiss+" ", OutcomeHitExact+" 11,22")
	}
	// The same question streamed: replayed from the cache with the usage
	// chunk the app asked for, and the header.
	var raw *http.Response
	st := c.Chat.Completions.NewStreaming(context.Background(), params, option.WithResponseInto(&raw),
		option.WithJSONSet("stream_options", map[string]any{"include_usage": true}))
	usage := streamedUsage(t, st)
	if usage.PromptTokens != 11 || usage.CompletionTokens != 22 || raw.Header.Get(HeaderTokensSaved) != "11,22" {
		t.Errorf("streamed hit: usage %d/%d, %s %q; want 11/22 and \"11,22\"", usage.PromptTokens, usage.CompletionTokens, HeaderTokensSaved, raw.Header.Get(HeaderTokensSaved))
	}
	tokensWhen(t, e, "gpt-test", TokenCount{Input: 22, Output: 44}, TokenCount{Input: 11, Output: 22})
}

// streamedUsage reads a Chat Completions stream to its end and returns the
// usage of its usage chunk (stream_options.include_usage); zero without one.
func streamedUsage(t *testing.T, st *ssestream.Stream[openai.ChatCompletionChunk]) openai.CompletionUsage {
	t.Helper()
	var usage openai.CompletionUsage
	for st.Next() {
		if ch := st.Current(); ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return usage
}
