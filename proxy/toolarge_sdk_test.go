package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// A prompt larger than the provider's token budget per minute, through the
// sidecar with the official SDK: the provider's "Request too large" reaches
// the app after one upstream call (never retried: it can never succeed),
// and the same prompt again is answered at once, 413 request_too_large in
// OpenAI's shape, without an upstream call: the sidecar learnt the limit
// and estimated the prompt's cost (proxy/wire/openai/cost.go).
func TestRequestTooLargeSDK(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if !strings.Contains(lastUser(body), "Summarise") {
			return false
		}
		w.Header().Set("Retry-After", "30")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"message": "Request too large for gpt-test in organization org-x on tokens per min (TPM): Limit 10000, Requested 12600. The input or output tokens must be reduced in order to run successfully.",
			"type":    "tokens", "code": "rate_limit_exceeded"}})
		return true
	}
	c := openai.NewClient(option.WithBaseURL(e.front.URL+"/v1/"), option.WithAPIKey("sk-app"), option.WithMaxRetries(0))
	big := openai.ChatCompletionNewParams{
		Model:     "gpt-test",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Summarise: " + strings.Repeat("lorem ipsum ", 4200))}, // about 12 600 tokens
		MaxTokens: openai.Int(100),
	}
	_, err := c.Chat.Completions.New(context.Background(), big)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || !strings.Contains(apiErr.Message, "Request too large") {
		t.Fatalf("first request: %v, want the provider's 429 Request too large", err)
	}
	if n := e.model.calls.Load(); n != 1 {
		t.Fatalf("%d upstream calls for a request too large, want 1 (never retried)", n)
	}
	start := time.Now()
	_, err = c.Chat.Completions.New(context.Background(), big)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusRequestEntityTooLarge || apiErr.Code != "request_too_large" || apiErr.Type != "invalid_request_error" {
		t.Fatalf("second request: %v, want 413 request_too_large in OpenAI's shape", err)
	}
	if d := time.Since(start); d > time.Second || e.model.calls.Load() != 1 {
		t.Errorf("answered after %s and %d upstream calls in all, want within 1s and no new call", d, e.model.calls.Load())
	}
	// A prompt that fits goes through.
	if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}); err != nil {
		t.Fatalf("a small request after: %v", err)
	}
}
