package lane

import (
	"bytes"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// MaxSniff bounds how much of a refusal body is searched for what it says
// (its limit here, the caller's overload markers).
const MaxSniff = 64 << 10

// Refusal is what a congestion refusal says of the limit it hit.
type Refusal struct {
	Limit string // a Limit…
	// PerMinute and Used are the provider's numbers when it gave them
	// (OpenAI's "Limit L, Used U"); 0 otherwise.
	PerMinute, Used int
	// TooLarge: the request alone exceeds the limit ("Request too large"):
	// it can never succeed, so it is neither retried nor queued.
	TooLarge bool
}

// openAINumbers reads OpenAI's 429 message: "Rate limit reached for gpt-4o
// in organization org-… on tokens per min (TPM): Limit 30000, Used 29000,
// Requested 2000. Please try again in 2s." and "Request too large for gpt-4o
// … on tokens per min (TPM): Limit 30000, Requested 50000."
// (https://platform.openai.com/docs/guides/rate-limits).
var openAINumbers = regexp.MustCompile(`Limit (\d+)(?:, Used (\d+))?, Requested (\d+)`)

// limitWords name the limit in a refusal's lower-cased message, most
// specific first: OpenAI's "tokens per min (TPM)" and "requests per min
// (RPM)", Anthropic's "… input tokens per minute", "output tokens per
// minute" (https://docs.anthropic.com/en/api/rate-limits), Gemini's quota
// ids (QuotaFailure.violations[].quotaId, such as
// GenerateContentPaidTierInputTokensPerModelPerMinute or
// GenerateRequestsPerMinutePerProjectPerModel,
// https://ai.google.dev/gemini-api/docs/rate-limits).
var limitWords = [...]struct{ word, limit string }{
	{"input tokens per minute", LimitInputTokens},
	{"output tokens per minute", LimitOutputTokens},
	{"inputtokensper", LimitInputTokens},
	{"outputtokensper", LimitOutputTokens},
	{"tokens per min", LimitTokens},
	{"tokensper", LimitTokens},
	{`"type": "tokens"`, LimitTokens},
	{`"type":"tokens"`, LimitTokens},
	{"requests per min", LimitRequests},
	{"requestsper", LimitRequests},
	{`"type": "requests"`, LimitRequests},
	{`"type":"requests"`, LimitRequests},
}

// spentHeaders name the limit whose remaining count an answer reports at
// 0, when the body says nothing: OpenAI's x-ratelimit-remaining-* and
// Anthropic's anthropic-ratelimit-*-remaining.
var spentHeaders = [...]struct{ header, limit string }{
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", LimitInputTokens},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", LimitOutputTokens},
	{"Anthropic-Ratelimit-Tokens-Remaining", LimitTokens},
	{"X-Ratelimit-Remaining-Tokens", LimitTokens},
	{"Anthropic-Ratelimit-Requests-Remaining", LimitRequests},
	{"X-Ratelimit-Remaining-Requests", LimitRequests},
}

// ClassifyRefusal reads which limit a congestion refusal hit, from its body
// and then its headers; a 529, an overload and a refusal that names no
// limit are the model's concurrency.
func ClassifyRefusal(status int, h http.Header, body []byte) Refusal {
	sniff := body[:min(len(body), MaxSniff)]
	r := Refusal{Limit: LimitConcurrency}
	if status == 529 || bytes.Contains(sniff, []byte(`"overloaded_error"`)) {
		return r
	}
	lower := strings.ToLower(string(sniff))
	found := false
	for _, w := range limitWords {
		if strings.Contains(lower, w.word) {
			r.Limit, found = w.limit, true
			break
		}
	}
	if !found {
		for _, sh := range spentHeaders {
			if v := strings.TrimSpace(h.Get(sh.header)); v != "" {
				if n, err := strconv.ParseFloat(v, 64); err == nil && n <= 0 {
					r.Limit, found = sh.limit, true
					break
				}
			}
		}
	}
	if !found {
		return r
	}
	if m := openAINumbers.FindStringSubmatch(string(sniff)); m != nil {
		r.PerMinute, _ = strconv.Atoi(m[1])
		r.Used, _ = strconv.Atoi(m[2])
	}
	// Gemini's QuotaFailure may carry the quota's value: "quotaValue": "1000000".
	if r.PerMinute == 0 {
		if i := strings.Index(lower, `"quotavalue"`); i >= 0 {
			rest := strings.TrimLeft(lower[i+len(`"quotavalue"`):], ` :"`)
			end := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' })
			if end > 0 {
				r.PerMinute, _ = strconv.Atoi(rest[:end])
			}
		}
	}
	r.TooLarge = strings.Contains(lower, "request too large") && r.Limit != LimitRequests
	return r
}
