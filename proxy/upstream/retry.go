package upstream

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CheckRetry decides whether an attempt that returned resp or err is worth retrying,
// and names the reason (a bounded label: "rate_limited", "server_error", "timeout",
// "conn_refused", "conn_reset", "conn_error" when retried).
type CheckRetry func(resp *http.Response, err error) (retry bool, reason string)

// Backoff returns the wait before attempt+1 of a target, attempt counting from 1.
// min and max bound the computed delay; resp is the failed answer, nil after a
// network error.
type Backoff func(attempt int, min, max time.Duration, resp *http.Response) time.Duration

// DefaultRetryOn are the statuses retried by default; 529 is Anthropic's
// "overloaded".
var DefaultRetryOn = []int{429, 500, 502, 503, 504, 529}

// DefaultCheckRetry retries DefaultRetryOn statuses, timeouts and connection
// failures; never 4xx other than 429, and never a cancelled context.
func DefaultCheckRetry(resp *http.Response, err error) (bool, string) {
	return checkRetry(DefaultRetryOn, resp, err)
}

// RetryOnStatus returns DefaultCheckRetry with statuses in place of DefaultRetryOn;
// an empty list means DefaultRetryOn.
func RetryOnStatus(statuses []int) CheckRetry {
	if len(statuses) == 0 {
		return DefaultCheckRetry
	}
	statuses = slices.Clone(statuses)
	return func(resp *http.Response, err error) (bool, string) {
		return checkRetry(statuses, resp, err)
	}
}

func checkRetry(statuses []int, resp *http.Response, err error) (bool, string) {
	if err != nil {
		return retryableErr(err)
	}
	if resp == nil {
		return false, "no_response"
	}
	s := resp.StatusCode
	switch {
	case slices.Contains(statuses, s) && s == http.StatusTooManyRequests:
		return true, "rate_limited"
	case slices.Contains(statuses, s):
		return true, "server_error"
	case s < 400:
		return false, "success"
	case s < 500:
		return false, "client_error"
	}
	return false, "server_error"
}

func retryableErr(err error) (bool, string) {
	var cert *x509.UnknownAuthorityError
	var host x509.HostnameError
	var inval x509.CertificateInvalidError
	switch {
	case errors.Is(err, context.Canceled):
		return false, "canceled"
	case isTimeout(err):
		return true, "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return true, "conn_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true, "conn_reset"
	case errors.As(err, &cert), errors.As(err, &host), errors.As(err, &inval):
		// A certificate problem does not heal on retry.
		return false, "tls_error"
	}
	var nerr net.Error
	var op *net.OpError
	if errors.As(err, &nerr) || errors.As(err, &op) {
		return true, "conn_error"
	}
	// Unknown transport failures (a proxy hiccup, a malformed response) are
	// usually transient; the deadline bounds the cost of being wrong.
	return true, "conn_error"
}

func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// DefaultBackoff honours the server's retry-after-ms or Retry-After (seconds or an
// HTTP date) when present, else waits a full-jitter exponential delay: a uniform
// random duration in [0, min(max, min·2^(attempt-1))].
func DefaultBackoff(attempt int, min, max time.Duration, resp *http.Response) time.Duration {
	if d, ok := RetryAfter(resp, time.Now()); ok {
		return d
	}
	ceil := backoffCeiling(attempt, min, max)
	if ceil <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

func backoffCeiling(attempt int, min, max time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	f := float64(min) * math.Pow(2, float64(attempt-1))
	if f > float64(max) || math.IsInf(f, 0) {
		return max
	}
	return time.Duration(f)
}

// RetryAfter returns the wait a response asks for: the "retry-after-ms" header
// (OpenAI, Azure) first, then "Retry-After" as seconds or an HTTP date relative to
// now. ok is false when resp is nil or carries neither.
func RetryAfter(resp *http.Response, now time.Time) (d time.Duration, ok bool) {
	if resp == nil {
		return 0, false
	}
	return retryAfterHeader(resp.Header, now)
}

func retryAfterHeader(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || math.IsInf(s, 0) || math.IsNaN(s) {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}
