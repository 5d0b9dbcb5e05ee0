package upstream

import (
	"bytes"
	"net/http"
	"strings"
)

// congestionMarkers are error types and statuses in refusal bodies that mean
// backpressure whatever the HTTP status: Anthropic's "overloaded_error" and
// "rate_limit_error" (https://docs.anthropic.com/en/api/errors), Google's
// "RESOURCE_EXHAUSTED" and "UNAVAILABLE" (https://ai.google.dev/gemini-api/docs/troubleshooting).
var congestionMarkers = [][]byte{
	[]byte(`"overloaded_error"`), []byte(`"rate_limit_error"`),
	[]byte(`"RESOURCE_EXHAUSTED"`), []byte(`"UNAVAILABLE"`),
}

// maxSniff bounds how much of a refusal body is searched for the markers.
const maxSniff = 64 << 10

// classifyAnswer reads a non-2xx answer. 429 (rate limited), 529 (Anthropic's
// overloaded) and 503 (what OpenAI, Azure and Gemini answer when a model is
// overloaded) are congestion, as is any body naming one of the
// congestionMarkers; the request's own Classify adds what its wire format
// knows (e.g. a retry delay in the body, a per-day quota).
func classifyAnswer(status int, h http.Header, body []byte, classify func(int, http.Header, []byte) Verdict) Verdict {
	var v Verdict
	if classify != nil {
		v = classify(status, h, body)
	}
	switch status {
	case http.StatusTooManyRequests, 529, http.StatusServiceUnavailable:
		v.Congestion = true
	}
	if !v.Congestion {
		sniff := body[:min(len(body), maxSniff)]
		for _, m := range congestionMarkers {
			if bytes.Contains(sniff, m) {
				v.Congestion = true
				break
			}
		}
	}
	return v
}

// shouldRetry applies the upstream's x-should-retry header, which OpenAI and
// Anthropic send to override their SDKs' retry decision ("true" or "false"),
// to the caller's own decision.
func shouldRetry(h http.Header, retry bool) bool {
	switch strings.ToLower(strings.TrimSpace(h.Get("X-Should-Retry"))) {
	case "true":
		return true
	case "false":
		return false
	}
	return retry
}
