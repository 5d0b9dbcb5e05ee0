package upstream

import (
	"bytes"
	"net/http"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/lib/retry"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// congestionMarkers are error types and statuses in refusal bodies that mean
// backpressure whatever the HTTP status: Anthropic's "overloaded_error" and
// "rate_limit_error" (https://docs.anthropic.com/en/api/errors), Google's
// "RESOURCE_EXHAUSTED" and "UNAVAILABLE" (https://ai.google.dev/gemini-api/docs/troubleshooting).
var congestionMarkers = [][]byte{
	[]byte(`"overloaded_error"`), []byte(`"rate_limit_error"`),
	[]byte(`"RESOURCE_EXHAUSTED"`), []byte(`"UNAVAILABLE"`),
}

// overloadWords mark a 503 as an overload rather than an outage, searched in
// the lower-cased body: OpenAI's "The engine is currently overloaded", Azure's
// and vLLM's "at capacity" and "rate limit" messages.
var overloadWords = []string{"overload", "capacity", "rate limit", "rate_limit", "too many requests", "try again later"}

// classifyAnswer reads a non-2xx answer. 429 (rate limited) and 529
// (Anthropic's overloaded) are congestion, as is any body naming one of the
// congestionMarkers, and a 503 that says it is an overload: it asks for a
// Retry-After, or its body has one of the overloadWords (what OpenAI, Azure
// and vLLM answer at capacity). A bare 503 (a load balancer without backends,
// maintenance) is an outage, for the breaker. The request's own Classify adds
// what its wire format knows (e.g. a retry delay in the body, a per-day quota).
func classifyAnswer(status int, h http.Header, body []byte, classify func(int, http.Header, []byte) Verdict) Verdict {
	var v Verdict
	if classify != nil {
		v = classify(status, h, body)
	}
	sniff := body[:min(len(body), lane.MaxSniff)]
	switch {
	case v.Congestion:
	case status == http.StatusTooManyRequests || status == 529:
		v.Congestion = true
	case status == http.StatusServiceUnavailable:
		if _, ok := retry.After(h, time.Now()); ok {
			v.Congestion = true
			break
		}
		lower := bytes.ToLower(sniff)
		for _, w := range overloadWords {
			if bytes.Contains(lower, []byte(w)) {
				v.Congestion = true
				break
			}
		}
	}
	if !v.Congestion {
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
