package report

import (
	"strconv"
	"strings"
	"time"
)

// maxTried bounds the steps a call's Tried lists: the first maxTried-1 and
// the last. A call's attempts are bounded by its retries and targets, but a
// log line should stay a line.
const maxTried = 8

// Step is what a call did at a target once: an attempt sent, or a shed
// before it was sent (Shed names the reason).
type Step struct {
	Target string
	// Status is the answer's status; 0 when none came (Reason says why)
	// or for a shed.
	Status int
	// Limit is the limit a congestion refusal hit (lane.Limit…); "" otherwise.
	Limit string
	// Reason is why an attempt got no answer ("timeout", "conn_refused",
	// the client went away: "canceled").
	Reason string
	// Shed is the reason the request was turned away before it was sent
	// (lane.Shed…); "" for an attempt.
	Shed string
	// Wait is how long the call waited after this step before it sent its
	// next attempt (a backoff, the provider's Retry-After, the lane's
	// queue); 0 for the last step and before a shed.
	Wait time.Duration
}

// Tried is what a call did at its targets, in order: one client request's
// attempts merged, for the one line the access log writes of it. It holds
// the first maxTried-1 steps and the last; N counts them all.
type Tried struct {
	N     int
	steps [maxTried]Step
	end   time.Time // when the last attempt ended
}

// Add records an attempt sent at start that ended at end; the wait since
// the previous attempt ended is that one's Wait.
func (t *Tried) Add(s Step, start, end time.Time) {
	if t.N > 0 && !t.end.IsZero() {
		t.steps[min(t.N-1, maxTried-1)].Wait = max(start.Sub(t.end), 0)
	}
	t.put(s)
	t.end = end
}

// Shed records that the request was turned away at target for reason.
func (t *Tried) Shed(target, reason string) {
	t.put(Step{Target: target, Shed: reason})
	t.end = time.Time{}
}

// put keeps s, the last step in the last cell.
func (t *Tried) put(s Step) {
	t.steps[min(t.N, maxTried-1)] = s
	t.N++
}

// Steps are the steps kept: all of them up to maxTried, else the first
// maxTried-1 and the last.
func (t *Tried) Steps() []Step {
	if t == nil {
		return nil
	}
	return t.steps[:min(t.N, maxTried)]
}

// String is the steps on one line: "a/gpt-4o 429 tokens, waited 1.2s;
// a/gpt-4o 429 requests, waited 800ms; a/gpt-4o 200", with "… N more"
// where steps were left out.
func (t *Tried) String() string {
	if t == nil || t.N == 0 {
		return ""
	}
	var b strings.Builder
	steps := t.Steps()
	for i, s := range steps {
		if i > 0 {
			b.WriteString("; ")
		}
		if i == maxTried-1 && t.N > maxTried {
			b.WriteString("… " + strconv.Itoa(t.N-maxTried) + " more; ")
		}
		b.WriteString(s.Target)
		switch {
		case s.Shed != "":
			b.WriteString(" shed " + s.Shed)
		case s.Status != 0:
			b.WriteString(" " + strconv.Itoa(s.Status))
		default:
			b.WriteString(" " + s.Reason)
		}
		if s.Limit != "" {
			b.WriteString(" " + s.Limit)
		}
		if s.Wait > 0 {
			b.WriteString(", waited " + roundWait(s.Wait).String())
		}
	}
	return b.String()
}

// roundWait rounds a wait to what a reader compares: tenths of a second
// from a second, milliseconds below, microseconds below a millisecond.
func roundWait(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}
