package upstream

import (
	"time"
)

// Verdict is what a wire format reads in an upstream's refusal, beyond the
// status and headers the caller understands itself.
type Verdict struct {
	// Congestion marks the answer as backpressure (the upstream is at capacity
	// or the key is over its rate limit): it shrinks the adaptive limit and
	// never counts as a breaker failure.
	Congestion bool
	// RetryAfter is the wait the body asks for (e.g. Gemini's
	// RetryInfo.retryDelay); 0 means none beyond the headers.
	RetryAfter time.Duration
	// NoRetrySameTarget stops retries on this target (e.g. a per-day quota):
	// the caller falls back to the next target or fails fast.
	NoRetrySameTarget bool
	// Reason names the refusal in the error message (e.g. the quota's name);
	// "" means the status alone.
	Reason string
}

// Busy reports whether the model's first target is under pressure: requests
// are queueing for it, it is paced by rate-limit state, or its breaker is not
// closed. Optional work (e.g. verification sampling) skips the model then.
// upstreamName is Request.Upstream: where the model goes when no route lists it.
func (c *Caller) Busy(model, upstreamName string) bool {
	r := c.routeFor(model)
	if r == nil || len(r.groups) == 0 || len(r.groups[0]) == 0 {
		return false
	}
	if r == c.def {
		return c.targetBusy(c.defaultMember(upstreamName, model).t, c.now())
	}
	return c.targetBusy(r.groups[0][0].t, c.now())
}

func (c *Caller) targetBusy(t *target, now time.Time) bool {
	if state, _ := t.breaker.Snapshot(now); state != StateClosed {
		return true
	}
	s := t.summary(now)
	return s.queued > 0 || s.paced
}
