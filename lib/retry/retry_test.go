package retry

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

func TestAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"spaces", map[string]string{"Retry-After": " 2 "}, 2 * time.Second, true},
		{"http date", map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second, true},
		{"http date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{"milliseconds", map[string]string{"retry-after-ms": "250"}, 250 * time.Millisecond, true},
		{"fractional milliseconds", map[string]string{"retry-after-ms": "1.5"}, 1500 * time.Microsecond, true},
		{"ms wins over seconds", map[string]string{"retry-after-ms": "20", "Retry-After": "3"}, 20 * time.Millisecond, true},
		{"bad ms fall back to seconds", map[string]string{"retry-after-ms": "x", "Retry-After": "3"}, 3 * time.Second, true},
		{"huge saturates", map[string]string{"Retry-After": "99999999999999999"}, math.MaxInt64, true},
		{"negative", map[string]string{"Retry-After": "-1"}, 0, false},
		{"nan", map[string]string{"Retry-After": "NaN"}, 0, false},
		{"inf", map[string]string{"Retry-After": "Inf"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "later"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := After(h, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("After(%v) = %s, %v; want %s, %v", tt.header, got, ok, tt.want, tt.ok)
			}
		})
	}
	if _, ok := After(nil, now); ok {
		t.Error("After(nil) ok = true")
	}
}

func TestReset(t *testing.T) {
	for v, want := range map[string]time.Duration{"1s": time.Second, "6m0s": 6 * time.Minute, "20ms": 20 * time.Millisecond, "2.5": 2500 * time.Millisecond} {
		if got, ok := Reset(v); !ok || got != want {
			t.Errorf("Reset(%q) = %s, %v; want %s", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-1s", "soon", "1e7"} {
		if got, ok := Reset(v); ok {
			t.Errorf("Reset(%q) = %s, true; want false", v, got)
		}
	}
}

func TestFullJitter(t *testing.T) {
	const base, maxDelay = 100 * time.Millisecond, time.Second
	for _, tt := range []struct {
		attempt int
		ceil    time.Duration
	}{{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {200, time.Second}} {
		t.Run(fmt.Sprint(tt.attempt), func(t *testing.T) {
			if got := Ceiling(tt.attempt, base, maxDelay); got != tt.ceil {
				t.Fatalf("Ceiling = %s, want %s", got, tt.ceil)
			}
			lo, hi := tt.ceil, time.Duration(0)
			for range 2000 {
				d := FullJitter(tt.attempt, base, maxDelay)
				if d < 0 || d > tt.ceil {
					t.Fatalf("FullJitter = %s, want within [0, %s]", d, tt.ceil)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			if lo > tt.ceil/10 || hi < tt.ceil*9/10 {
				t.Errorf("spread [%s, %s], want close to [0, %s]", lo, hi, tt.ceil)
			}
		})
	}
	if d := FullJitter(3, 0, 0); d != 0 {
		t.Errorf("FullJitter with zero delays = %s", d)
	}
}

func TestDelayPrefersTheServer(t *testing.T) {
	h := http.Header{"Retry-After": {"30"}}
	if d, hinted := Delay(1, time.Millisecond, time.Second, h, time.Now()); !hinted || d != 30*time.Second {
		t.Errorf("Delay = %s, %v; want the server's 30s (above the max delay, not capped)", d, hinted)
	}
	if d, hinted := Delay(1, time.Millisecond, time.Second, nil, time.Now()); hinted || d > time.Millisecond {
		t.Errorf("Delay without a hint = %s, %v; want jitter within 1ms", d, hinted)
	}
}

// TestAllowed is the cap rule both retrying clients follow.
func TestAllowed(t *testing.T) {
	const maxDelay = time.Second
	tests := []struct {
		name        string
		wait        time.Duration
		hinted      bool
		left        time.Duration
		hasDeadline bool
		want        bool
	}{
		{"hint above max, fits the deadline", 3 * time.Second, true, 10 * time.Second, true, true},
		{"hint beyond the deadline", 3 * time.Second, true, 2 * time.Second, true, false},
		{"backoff beyond the deadline", 500 * time.Millisecond, false, 100 * time.Millisecond, true, false},
		{"hint above max, no deadline", 3 * time.Second, true, 0, false, false},
		{"hint within max, no deadline", 500 * time.Millisecond, true, 0, false, true},
		{"backoff, no deadline", 500 * time.Millisecond, false, 0, false, true},
	}
	for _, tt := range tests {
		if got := Allowed(tt.wait, tt.hinted, maxDelay, tt.left, tt.hasDeadline); got != tt.want {
			t.Errorf("%s: Allowed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestStatus(t *testing.T) {
	for code, want := range map[int]string{429: "rate_limited", 500: "server_error", 529: "server_error", 200: "success", 400: "client_error", 501: "server_error"} {
		ok, reason := Status(nil, code)
		if reason != want || ok != (code == 429 || code == 500 || code == 529) {
			t.Errorf("Status(%d) = %v, %q; want reason %q", code, ok, reason, want)
		}
	}
	if ok, _ := Status([]int{501}, 501); !ok {
		t.Error("a configured status is not retried")
	}
	if ok, _ := Status([]int{501}, 500); ok {
		t.Error("an unlisted status is retried")
	}
}

func TestError(t *testing.T) {
	tests := []struct {
		err    error
		ok     bool
		reason string
	}{
		{context.Canceled, false, "canceled"},
		{context.DeadlineExceeded, true, "timeout"},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true, "conn_refused"},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true, "conn_reset"},
		{io.ErrUnexpectedEOF, true, "conn_reset"},
		{&x509.UnknownAuthorityError{}, false, "tls_error"},
		{&net.OpError{Op: "dial", Err: errors.New("no route")}, true, "conn_error"},
	}
	for _, tt := range tests {
		ok, reason := Error(tt.err)
		if ok != tt.ok || reason != tt.reason {
			t.Errorf("Error(%v) = %v, %q; want %v, %q", tt.err, ok, reason, tt.ok, tt.reason)
		}
	}
	if IsNetwork(&json.SyntaxError{}) || !IsNetwork(&net.OpError{Op: "read", Err: errors.New("x")}) {
		t.Error("IsNetwork misclassifies")
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v", err)
	}
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Errorf("Sleep = %v", err)
	}
}
