package upstream

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

func TestReportExhausted(t *testing.T) {
	tests := []struct {
		name       string
		fill       func(r *report)
		status     int
		code       string
		retryAfter time.Duration
		is         error
	}{
		{"last upstream 503", func(r *report) {
			r.attempts, r.lastStatus = 3, 503
			r.note("a", "answered 503")
		}, 503, CodeUpstreamError, time.Second, ErrNoHealthyTarget},
		{"last upstream 429 with its hint", func(r *report) {
			r.attempts, r.lastStatus = 1, 429
			r.note("a", "answered 429")
			r.hint("a", 2500*time.Millisecond)
		}, 429, CodeUpstreamError, 3 * time.Second, ErrNoHealthyTarget},
		{"529 becomes 503", func(r *report) {
			r.attempts, r.lastStatus = 1, 529
			r.note("a", "answered 529")
		}, 503, CodeUpstreamError, time.Second, ErrNoHealthyTarget},
		{"connection error", func(r *report) {
			r.attempts, r.lastErr = 1, io.ErrUnexpectedEOF
			r.note("a", "connection reset")
		}, 502, CodeUpstreamError, time.Second, ErrNoHealthyTarget},
		{"attempt timeout", func(r *report) {
			r.attempts, r.lastErr = 1, &attemptTimeout{after: time.Second}
			r.note("a", "attempt timed out after 1s")
		}, 504, CodeUpstreamError, time.Second, ErrNoHealthyTarget},
		{"every queue full", func(r *report) {
			r.note("a", "queue full")
			r.hint("a", lane.ShedRetryAfter)
			r.shed = append(r.shed, "breakwater: the 'default' queue for upstream a is full")
		}, 429, CodeCapacityExceeded, time.Second, ErrShed},
		{"every breaker open: the soonest wins", func(r *report) {
			r.note("a", "circuit open")
			r.hint("a", 30*time.Second)
			r.note("b", "circuit open")
			r.hint("b", 12*time.Second)
		}, 503, CodeNoHealthyTarget, 12 * time.Second, ErrNoHealthyTarget},
		{"a target without a hint may serve in a second", func(r *report) {
			r.attempts, r.lastStatus = 1, 500
			r.note("a", "circuit open")
			r.hint("a", 30*time.Second)
			r.note("b", "answered 500")
		}, 500, CodeUpstreamError, time.Second, ErrNoHealthyTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &report{model: "gpt-4o"}
			tt.fill(r)
			e := r.exhausted()
			if got, want := e.Status, tt.status; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if got, want := e.Code, tt.code; got != want {
				t.Errorf("code = %q, want %q", got, want)
			}
			if got, want := e.RetryAfter, tt.retryAfter; got != want {
				t.Errorf("retry after = %s, want %s", got, want)
			}
			if !errors.Is(e, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", e, tt.is)
			}
			if e.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

func TestReportDeadline(t *testing.T) {
	r := &report{model: "gpt-4o", attempts: 2}
	r.note("a", "answered 503")
	e := r.deadline(300 * time.Millisecond)
	if got, want := e.Status, 504; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if !errors.Is(e, context.DeadlineExceeded) || errors.Is(e, ErrShed) {
		t.Errorf("errors.Is mismatch for %v", e)
	}
	if got, want := e.Message, `breakwater: model "gpt-4o" got no answer within the 300ms deadline after 2 attempts (a: answered 503); retry after 1s`; got != want {
		t.Errorf("message = %q\nwant        %q", got, want)
	}
}
