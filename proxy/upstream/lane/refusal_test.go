package lane

import (
	"net/http"
	"testing"
)

// TestClassifyRefusal: each provider's refusal names the limit it hit, in its
// body or its headers, with the provider's numbers when it gives them.
func TestClassifyRefusal(t *testing.T) {
	anthropicSpent := http.Header{}
	anthropicSpent.Set("Anthropic-Ratelimit-Output-Tokens-Remaining", "0")
	anthropicSpent.Set("Anthropic-Ratelimit-Input-Tokens-Remaining", "12000")
	tests := []struct {
		name     string
		status   int
		header   http.Header
		body     string
		want     string
		limit    int
		tooLarge bool
	}{
		{"openai tpm", 429, nil, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.","type":"tokens","code":"rate_limit_exceeded"}}`, LimitTokens, 30000, false},
		{"openai rpm", 429, nil, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","code":"rate_limit_exceeded"}}`, LimitRequests, 500, false},
		{"openai too large", 429, nil, `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 50000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","code":"rate_limit_exceeded"}}`, LimitTokens, 30000, true},
		{"anthropic input", 429, nil, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}}`, LimitInputTokens, 0, false},
		{"anthropic headers", 429, anthropicSpent, `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited."}}`, LimitOutputTokens, 0, false},
		{"anthropic overloaded", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, LimitConcurrency, 0, false},
		{"gemini input tokens", 429, nil, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateContentPaidTierInputTokensPerModelPerMinute","quotaValue":"1000000"}]}]}}`, LimitInputTokens, 1000000, false},
		{"gemini requests", 429, nil, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]}]}}`, LimitRequests, 0, false},
		{"bare 429", 429, nil, `{"error":{"message":"slow down"}}`, LimitConcurrency, 0, false},
		{"overload 503", 503, nil, `{"error":{"message":"The engine is currently overloaded"}}`, LimitConcurrency, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			got := ClassifyRefusal(tt.status, h, []byte(tt.body))
			if got.Limit != tt.want || got.PerMinute != tt.limit || got.TooLarge != tt.tooLarge {
				t.Errorf("ClassifyRefusal = %+v, want limit %s, per minute %d, too large %v", got, tt.want, tt.limit, tt.tooLarge)
			}
		})
	}
}
