// Package retry holds the retry rules the upstream caller and the OpenAI embedder share.
//
// One set of rules, so the two cannot disagree: which statuses and errors are
// worth another attempt, the full-jitter backoff, how a server's wait is read
// (retry-after-ms, Retry-After in seconds, fractional or not, or as an HTTP
// date; x-ratelimit-reset-*) and what happens when that wait is longer than
// the maximum delay.
//
// The cap rule: the maximum delay caps only the backoff Breakwater computes.
// A server's wait is never shortened, because coming back earlier than asked
// only earns another 429 (RFC 9110 §10.2.3; OpenAI and Anthropic both send
// Retry-After on 429 and 529). It is slept when the deadline leaves room for
// it and ends the retries at once when it does not; with no deadline at all,
// a wait above the maximum delay ends them too, so no header can hold a call
// without limit. See Allowed.
package retry

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

// Defaults shared by every retrying client.
const (
	// DefaultBaseDelay is the first backoff ceiling; it doubles per retry.
	DefaultBaseDelay = 200 * time.Millisecond
	// DefaultMaxDelay caps a computed backoff. 5s: with the default three
	// attempts and 60s deadline, a target that keeps failing is left for the
	// next one within seconds rather than tens of seconds.
	DefaultMaxDelay = 5 * time.Second
)

// DefaultStatuses are the HTTP statuses worth another attempt: 429, the 5xx
// that signal overload or a bad gateway, and 529, Anthropic's "overloaded".
// 501 and other 5xx are permanent.
var DefaultStatuses = []int{429, 500, 502, 503, 504, 529}

// Status reports whether an answer with code should be retried under
// statuses (nil: DefaultStatuses), and names the reason: "rate_limited",
// "server_error", "client_error" or "success". The names are bounded metric
// label values.
func Status(statuses []int, code int) (bool, string) {
	if statuses == nil {
		statuses = DefaultStatuses
	}
	switch {
	case slices.Contains(statuses, code) && code == http.StatusTooManyRequests:
		return true, "rate_limited"
	case slices.Contains(statuses, code):
		return true, "server_error"
	case code < 400:
		return false, "success"
	case code < 500:
		return false, "client_error"
	}
	return false, "server_error"
}

// Error reports whether a transport error should be retried and names it:
// "timeout", "conn_refused", "conn_reset", "conn_error" (retried), or
// "canceled", "tls_error" (not). A certificate problem does not heal on
// retry, and a cancelled context means nobody waits for the answer. Unknown
// transport failures (a proxy hiccup, a malformed response) are usually
// transient and are retried; the deadline bounds the cost of being wrong.
func Error(err error) (bool, string) {
	var cert *x509.UnknownAuthorityError
	var host x509.HostnameError
	var inval x509.CertificateInvalidError
	switch {
	case errors.Is(err, context.Canceled):
		return false, "canceled"
	case IsTimeout(err):
		return true, "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return true, "conn_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true, "conn_reset"
	case errors.As(err, &cert), errors.As(err, &host), errors.As(err, &inval):
		return false, "tls_error"
	}
	return true, "conn_error"
}

// IsTimeout reports whether err is a deadline or a network timeout.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// IsNetwork reports whether err came from the network (a net.Error or a
// net.OpError), as opposed to a decoding or protocol error.
func IsNetwork(err error) bool {
	var nerr net.Error
	var op *net.OpError
	return errors.As(err, &nerr) || errors.As(err, &op)
}

// Ceiling is the full-jitter ceiling before retry attempt+1 (attempt counts
// from 1): min(max, base·2^(attempt-1)).
func Ceiling(attempt int, base, max time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	f := float64(base) * math.Pow(2, float64(attempt-1))
	if f > float64(max) || math.IsInf(f, 0) {
		return max
	}
	return time.Duration(f)
}

// FullJitter is a uniform random wait in [0, Ceiling(attempt, base, max)]
// ("full jitter": retries of many clients spread out instead of arriving
// together).
func FullJitter(attempt int, base, max time.Duration) time.Duration {
	ceil := Ceiling(attempt, base, max)
	if ceil <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// Delay is the wait before retry attempt+1: the server's (After) when it
// sent one, hinted true, else FullJitter. h may be nil.
func Delay(attempt int, base, max time.Duration, h http.Header, now time.Time) (d time.Duration, hinted bool) {
	if d, ok := After(h, now); ok {
		return d, true
	}
	return FullJitter(attempt, base, max), false
}

// Allowed reports whether a wait may be slept before the next attempt (see
// the package comment): it must end before the deadline (left is the time
// remaining, hasDeadline false when there is none), and without a deadline a
// server's wait must not exceed maxDelay.
func Allowed(wait time.Duration, hinted bool, maxDelay, left time.Duration, hasDeadline bool) bool {
	if hasDeadline {
		return wait < left
	}
	return !hinted || wait <= maxDelay
}

// After returns the wait a response's headers ask for: "retry-after-ms"
// (OpenAI, Azure) first, then "Retry-After" (RFC 9110 §10.2.3) as seconds,
// fractional ones included ("1.5": some providers send them, Go's and
// Python's SDKs accept them), or as an HTTP date relative to now. A date in
// the past is a wait of 0. ok is false when h carries neither or only
// values that do not parse; a wait too long for a Duration saturates.
func After(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return scale(ms, time.Millisecond), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if d, ok := Seconds(v); ok {
		return d, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Seconds parses a non-negative number of seconds, fractional or not.
func Seconds(v string) (time.Duration, bool) {
	s, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || s < 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return 0, false
	}
	return scale(s, time.Second), true
}

// Reset parses an x-ratelimit-reset-* value: a Go duration as OpenAI sends
// it ("1s", "6m0s", "20ms") or seconds. Unlike Retry-After it only paces
// (holds a target back), so an absurd value (a million seconds or more) is
// ignored rather than holding the target for weeks.
func Reset(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, true
	}
	if d, ok := Seconds(v); ok && d < 1e6*time.Second {
		return d, true
	}
	return 0, false
}

// scale returns n units, saturating at the longest Duration.
func scale(n float64, unit time.Duration) time.Duration {
	f := n * float64(unit)
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f)
}

// Sleep waits for d or until ctx is done, returning ctx.Err() then.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
