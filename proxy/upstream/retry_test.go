package upstream

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestDefaultCheckRetry(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		name   string
		status int // 0: no response
		err    error
		retry  bool
		reason string
	}{
		{"200", 200, nil, false, "success"},
		{"400", 400, nil, false, "client_error"},
		{"401", 401, nil, false, "client_error"},
		{"403", 403, nil, false, "client_error"},
		{"404", 404, nil, false, "client_error"},
		{"409", 409, nil, false, "client_error"},
		{"413", 413, nil, false, "client_error"},
		{"422", 422, nil, false, "client_error"},
		{"429", 429, nil, true, "rate_limited"},
		{"500", 500, nil, true, "server_error"},
		{"501 not worth retrying", 501, nil, false, "server_error"},
		{"502", 502, nil, true, "server_error"},
		{"503", 503, nil, true, "server_error"},
		{"504", 504, nil, true, "server_error"},
		{"529 overloaded", 529, nil, true, "server_error"},
		{"client cancelled", 0, fmt.Errorf("send: %w", context.Canceled), false, "canceled"},
		{"deadline", 0, context.DeadlineExceeded, true, "timeout"},
		{"attempt timeout", 0, &attemptTimeout{after: time.Second}, true, "timeout"},
		{"connection refused", 0, refused, true, "conn_refused"},
		{"connection reset", 0, reset, true, "conn_reset"},
		{"body cut short", 0, io.ErrUnexpectedEOF, true, "conn_reset"},
		{"unknown authority", 0, &x509.UnknownAuthorityError{}, false, "tls_error"},
		{"other network error", 0, &net.OpError{Op: "dial", Err: errors.New("no route to host")}, true, "conn_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp *http.Response
			if tt.status != 0 {
				resp = &http.Response{StatusCode: tt.status, Header: http.Header{}}
			}
			retry, reason := DefaultCheckRetry(resp, tt.err)
			if got, want := retry, tt.retry; got != want {
				t.Errorf("retry = %v, want %v", got, want)
			}
			if got, want := reason, tt.reason; got != want {
				t.Errorf("reason = %q, want %q", got, want)
			}
		})
	}
}

func TestRetryOnStatus(t *testing.T) {
	check := RetryOnStatus([]int{503, 408})
	tests := []struct {
		status int
		retry  bool
	}{{503, true}, {408, true}, {429, false}, {500, false}, {400, false}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			got, _ := check(&http.Response{StatusCode: tt.status}, nil)
			if want := tt.retry; got != want {
				t.Errorf("retry(%d) = %v, want %v", tt.status, got, want)
			}
		})
	}
}

func TestDefaultBackoffFullJitter(t *testing.T) {
	const base, maxDelay = 100 * time.Millisecond, time.Second
	tests := []struct {
		attempt int
		ceil    time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second}, // capped
		{60, time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("attempt %d", tt.attempt), func(t *testing.T) {
			var lo, hi time.Duration = tt.ceil, 0
			for range 2000 {
				d := DefaultBackoff(tt.attempt, base, maxDelay, nil)
				if d < 0 || d > tt.ceil {
					t.Fatalf("backoff = %s, want within [0, %s]", d, tt.ceil)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			// Full jitter spreads over the whole range, not just its top.
			if lo > tt.ceil/10 || hi < tt.ceil*9/10 {
				t.Errorf("backoff spread [%s, %s], want close to [0, %s]", lo, hi, tt.ceil)
			}
		})
	}
}

func TestDefaultBackoffHonoursServer(t *testing.T) {
	tests := []struct {
		name     string
		header   map[string]string
		min, max time.Duration
	}{
		{"retry-after seconds", map[string]string{"Retry-After": "2"}, 2 * time.Second, 2 * time.Second},
		{"retry-after beyond max delay", map[string]string{"Retry-After": "30"}, 30 * time.Second, 30 * time.Second},
		{"retry-after-ms", map[string]string{"Retry-After-Ms": "150"}, 150 * time.Millisecond, 150 * time.Millisecond},
		{"ms wins over seconds", map[string]string{"Retry-After-Ms": "20", "Retry-After": "1"}, 20 * time.Millisecond, 20 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)}, 1900 * time.Millisecond, 3 * time.Second},
		{"garbage falls back to jitter", map[string]string{"Retry-After": "soon"}, 0, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 429, Header: http.Header{}}
			for k, v := range tt.header {
				resp.Header.Set(k, v)
			}
			d := DefaultBackoff(1, 100*time.Millisecond, time.Second, resp)
			if d < tt.min || d > tt.max {
				t.Errorf("backoff = %s, want within [%s, %s]", d, tt.min, tt.max)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "1"}, time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "0.25"}, 250 * time.Millisecond, true},
		{"http date", map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second, true},
		{"http date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{"milliseconds", map[string]string{"retry-after-ms": "20"}, 20 * time.Millisecond, true},
		{"bad milliseconds fall back to seconds", map[string]string{"retry-after-ms": "x", "Retry-After": "3"}, 3 * time.Second, true},
		{"negative", map[string]string{"Retry-After": "-1"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "later"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{Header: http.Header{}}
			for k, v := range tt.header {
				resp.Header.Set(k, v)
			}
			got, ok := RetryAfter(resp, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("RetryAfter = %s, %v; want %s, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	if _, ok := RetryAfter(nil, now); ok {
		t.Error("RetryAfter(nil) ok = true, want false")
	}
}
