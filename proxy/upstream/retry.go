package upstream

import (
	"net/http"
	"slices"
	"time"

	"github.com/breakwater-dev/breakwater/lib/retry"
)

// CheckRetry decides whether an attempt that returned resp or err is worth retrying,
// and names the reason (a bounded label: "rate_limited", "server_error", "timeout",
// "conn_refused", "conn_reset", "conn_error" when retried).
type CheckRetry func(resp *http.Response, err error) (retry bool, reason string)

// Backoff returns the wait before attempt+1 of a target, attempt counting from 1.
// min and max bound the computed delay; resp is the failed answer, nil after a
// network error.
type Backoff func(attempt int, min, max time.Duration, resp *http.Response) time.Duration

// DefaultRetryOn are the statuses retried by default (retry.DefaultStatuses);
// 529 is Anthropic's "overloaded".
var DefaultRetryOn = slices.Clone(retry.DefaultStatuses)

// DefaultCheckRetry retries DefaultRetryOn statuses, timeouts and connection
// failures; never 4xx other than 429, and never a cancelled context.
func DefaultCheckRetry(resp *http.Response, err error) (bool, string) {
	return checkRetry(DefaultRetryOn, resp, err)
}

// RetryOnStatus returns DefaultCheckRetry with statuses in place of DefaultRetryOn;
// nil means DefaultRetryOn, and an empty non-nil list no status (connection
// errors and timeouts only).
func RetryOnStatus(statuses []int) CheckRetry {
	if statuses == nil {
		return DefaultCheckRetry
	}
	statuses = slices.Clone(statuses)
	return func(resp *http.Response, err error) (bool, string) {
		return checkRetry(statuses, resp, err)
	}
}

func checkRetry(statuses []int, resp *http.Response, err error) (bool, string) {
	if err != nil {
		return retry.Error(err)
	}
	if resp == nil {
		return false, "no_response"
	}
	return retry.Status(statuses, resp.StatusCode)
}

func isTimeout(err error) bool { return retry.IsTimeout(err) }

// DefaultBackoff honours the server's retry-after-ms or Retry-After (seconds,
// fractional ones included, or an HTTP date) when present, even above max (a
// wait the deadline cannot hold skips the target instead), else waits a
// full-jitter exponential delay: a uniform random duration in
// [0, min(max, min·2^(attempt-1))]. The rules live in lib/retry, shared
// with the OpenAI embedder.
func DefaultBackoff(attempt int, min, max time.Duration, resp *http.Response) time.Duration {
	var h http.Header
	if resp != nil {
		h = resp.Header
	}
	d, _ := retry.Delay(attempt, min, max, h, time.Now())
	return d
}

// RetryAfter returns the wait a response asks for: the "retry-after-ms" header
// (OpenAI, Azure) first, then "Retry-After" as seconds or an HTTP date relative to
// now. ok is false when resp is nil or carries neither.
func RetryAfter(resp *http.Response, now time.Time) (d time.Duration, ok bool) {
	if resp == nil {
		return 0, false
	}
	return retry.After(resp.Header, now)
}
