package upstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// Sentinels callers branch on with errors.Is.
var (
	// ErrNoHealthyTarget matches every *Error whose Code is "no_healthy_target" or
	// "upstream_error": no target could give an answer, so the proxy may serve a
	// stale entry (degraded mode).
	ErrNoHealthyTarget = errors.New("no healthy target")
	// ErrShed matches an *Error with Code "capacity_exceeded": every eligible
	// target's queue was full.
	ErrShed = lane.ErrShed
	// ErrUnknownModel matches an *Error with Code "model_not_found": no route names
	// the model and there is no default upstream.
	ErrUnknownModel = errors.New("unknown model")
)

// Error codes, also the OpenAI-shaped error "code" the proxy answers with.
const (
	CodeCapacityExceeded = "capacity_exceeded"
	CodeNoHealthyTarget  = "no_healthy_target"
	CodeDeadlineExceeded = "deadline_exceeded"
	CodeUpstreamError    = "upstream_error"
	CodeModelNotFound    = "model_not_found"
)

// Error is what the caller returns when no upstream answer can be handed back.
//
// Status is what the proxy should answer:
//   - 429 capacity_exceeded: every eligible target's queue was full (shed);
//   - 503 no_healthy_target: no attempt was made because every target was open,
//     paced out beyond the deadline or otherwise unavailable;
//   - 504 deadline_exceeded: the deadline ran out during attempts or waits (429
//     when a target tried answers other requests: it is congested); a
//     request the lane held and shed before any attempt gets the shed's 429
//     capacity_exceeded instead, whatever the deadline;
//   - upstream_error: attempts were made and all failed, or the deadline ran
//     out after the provider refused the last one; Status is the last
//     upstream status when it was 429, 500, 502, 503 or 504, 503 for 529 (and
//     other retryable statuses; 429 for one a Classify verdict calls
//     congestion), 502 after a connection error, 504 after an attempt timeout;
//   - 404 model_not_found: no route and no default upstream.
type Error struct {
	Status int
	Code   string
	// Message says which targets were tried, what they answered and when to retry.
	Message string
	// RetryAfter is the wait to suggest to the client; at least 1s except for 404.
	RetryAfter time.Duration
	// Attempts counts the upstream requests sent; Tried is what the call
	// did at its targets, its attempts merged (nil when it reached none).
	Attempts int
	Tried    *Tried
	// Err is the last underlying cause (an upstream status, a network error,
	// context.DeadlineExceeded).
	Err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinels by Code, so errors.Is works whatever the cause.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoHealthyTarget:
		return e.Code == CodeNoHealthyTarget || e.Code == CodeUpstreamError
	case ErrShed:
		return e.Code == CodeCapacityExceeded
	case ErrUnknownModel:
		return e.Code == CodeModelNotFound
	case context.DeadlineExceeded:
		return e.Code == CodeDeadlineExceeded
	}
	return false
}

// StatusError is the cause recorded when an upstream answered a retryable status.
type StatusError struct {
	Status int
}

func (e *StatusError) Error() string { return fmt.Sprintf("upstream answered %d", e.Status) }

// report collects what happened to each target during one request, in order, so
// the final error can tell a person what was tried.
type report struct {
	model      string
	order      []string
	events     map[string][]string
	attempts   int
	lastStatus int
	lastErr    error
	hints      map[string]time.Duration // per target: the longest wait it asked for or needs
	shed       []string                 // shed messages
	congested  bool                     // the last attempt was refused as congestion by a target that answers others
	alive      bool                     // a target tried had answered within aliveWindow
	tried      Tried                    // the attempts and sheds, for the access log
}

func (r *report) note(target, event string) {
	if r.events == nil {
		r.events = make(map[string][]string)
	}
	if _, ok := r.events[target]; !ok {
		r.order = append(r.order, target)
	}
	r.events[target] = append(r.events[target], event)
}

func (r *report) hint(target string, d time.Duration) {
	if r.hints == nil {
		r.hints = make(map[string]time.Duration)
	}
	r.hints[target] = max(r.hints[target], d)
}

// retryAfter is the earliest time any target may serve again: the smallest
// per-target hint, 0 when a target failed without one.
func (r *report) retryAfter() time.Duration {
	var soonest time.Duration
	for i, t := range r.order {
		if d := r.hints[t]; i == 0 || d < soonest {
			soonest = d
		}
	}
	return soonest
}

func (r *report) summary() string {
	parts := make([]string, 0, len(r.order))
	for _, t := range r.order {
		parts = append(parts, t+": "+strings.Join(r.events[t], ", "))
	}
	if len(parts) == 0 {
		return "no target was eligible"
	}
	return strings.Join(parts, "; ")
}

func atLeastSecond(d time.Duration) time.Duration { return lane.AtLeastSecond(d) }

// exhausted builds the error for a request whose every target was tried or skipped.
func (r *report) exhausted() *Error {
	ra := atLeastSecond(r.retryAfter())
	switch {
	case r.attempts > 0:
		status := 502
		switch {
		case r.lastStatus == 429, r.lastStatus >= 500 && r.lastStatus <= 504:
			// The provider's last refusal, as it said it: the app's SDK
			// retries a 429 or 503 with its Retry-After (OpenAI's and
			// Anthropic's SDKs retry 429 and 5xx; genai maps them to
			// RESOURCE_EXHAUSTED and UNAVAILABLE).
			status = r.lastStatus
		case r.lastStatus == 529:
			// Anthropic's overloaded: 503, which Anthropic's shape answers
			// as 529 overloaded_error and other APIs as unavailable.
			status = 503
		case r.congested:
			// Backpressure in another status (a Classify verdict): "retry
			// later", not a fault.
			status = 429
		case r.lastStatus != 0:
			status = 503
		case isTimeout(r.lastErr):
			status = 504
		}
		return &Error{
			Status: status, Code: CodeUpstreamError, RetryAfter: ra, Attempts: r.attempts, Tried: &r.tried, Err: r.lastErr,
			Message: fmt.Sprintf("breakwater: no upstream answered model %q after %d attempts (%s); retry after %s",
				r.model, r.attempts, r.summary(), ra),
		}
	case len(r.shed) > 0:
		msg := r.shed[0]
		if len(r.order) > 1 {
			msg += " (" + r.summary() + ")"
		}
		return &Error{Status: 429, Code: CodeCapacityExceeded, RetryAfter: ra, Tried: &r.tried, Err: ErrShed, Message: msg}
	default:
		return &Error{
			Status: 503, Code: CodeNoHealthyTarget, RetryAfter: ra, Tried: &r.tried, Err: ErrNoHealthyTarget,
			Message: fmt.Sprintf("breakwater: no healthy target for model %q (%s); retry after %s",
				r.model, r.summary(), ra),
		}
	}
}

// deadline builds the error for a request whose deadline ran out.
//
// The status is 504, or 429 when a target it tried answered other requests
// or refused one for congestion within aliveWindow: a model that answers,
// only not in time for this request, is congested, and the app should come
// back later.
func (r *report) deadline(d time.Duration) *Error {
	ra := atLeastSecond(r.retryAfter())
	status := 504
	if r.alive {
		status = 429
	}
	return &Error{
		Status: status, Code: CodeDeadlineExceeded, RetryAfter: ra, Attempts: r.attempts, Tried: &r.tried, Err: context.DeadlineExceeded,
		Message: fmt.Sprintf("breakwater: model %q got no answer within the %s deadline after %d attempts (%s); retry after %s",
			r.model, d.Round(time.Millisecond), r.attempts, r.summary(), ra),
	}
}
