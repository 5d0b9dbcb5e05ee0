package upstream

import (
	"math"
	"time"
)

// Adaptive concurrency defaults. The limit starts small and finds the
// upstream's capacity at run time; MaxConcurrency is only its ceiling.
const (
	// DefaultInitialLimit is a new lane's concurrency limit before it has
	// learnt anything: small enough that a model at capacity refuses few
	// requests while the limit grows to what it can take.
	DefaultInitialLimit = 4
	// DefaultMaxConcurrency is the ceiling of every lane's adaptive limit and
	// of an upstream's attempts in flight when none is configured.
	DefaultMaxConcurrency = 256
	// DefaultMaxQueue is how many requests may wait for a slot of one lane
	// (and of one pool) when none is configured. The wait a request is
	// expected to have, not this bound, is what normally sheds it.
	DefaultMaxQueue = 1024
	// DefaultRetryAfterCap bounds how long an upstream's Retry-After or
	// rate-limit reset can hold a lane back.
	DefaultRetryAfterCap = 5 * time.Minute
)

// AIMD constants. A refusal multiplies the limit by backoffRatio, at most once
// per round trip (only refusals of attempts sent after the last cut count,
// as TCP's fast recovery does). Without a refusal yet, each answer adds one
// (slow start: the limit doubles every round trip). After a refusal the limit
// remembers where it was refused (as TCP CUBIC's W_max): it grows back by one
// per round trip to one below that point, then by probeStart per round trip
// up to it, so a model whose capacity did not change is kept full and probed
// gently; beyond it the increment doubles every round trip without a refusal
// (it is refused at once if the capacity did not change), so a model that
// came back is found again within a few round trips.
const (
	backoffRatio = 0.7
	probeStart   = 0.25
	minLimit     = 1.0
)

// aimd is one lane's adaptive concurrency limit. It is not safe for concurrent
// use: the lane's mutex guards it.
type aimd struct {
	limit     float64
	ceiling   float64
	cut       bool                // a refusal has been seen: slow start is over
	lastCut   time.Time           // when the limit was last cut
	refusedAt float64             // the limit at the last cut
	rounds    float64             // round trips (answers / limit) spent above refusedAt
	serviceE  float64             // EWMA of answered attempts' durations, seconds; 0 = none yet
	recent    [rateRing]time.Time // when the last answers came, a ring
	next, n   int
}

// rateRing is how many recent answers the measured completion rate spans.
const rateRing = 32

func newAIMD(ceiling int) aimd {
	if ceiling <= 0 {
		ceiling = DefaultMaxConcurrency
	}
	return aimd{limit: min(DefaultInitialLimit, float64(ceiling)), ceiling: float64(ceiling)}
}

// slots is how many attempts may be in flight.
func (a *aimd) slots() int { return max(int(a.limit), 1) }

// answered records an answer that took d. inflight is how many attempts were
// in flight when it came back, this one included: the limit only grows while
// it is used, so an idle lane does not inflate it.
func (a *aimd) answered(d time.Duration, inflight int) {
	a.recent[a.next] = time.Now()
	a.next = (a.next + 1) % rateRing
	a.n = min(a.n+1, rateRing)
	const alpha = 0.2
	s := d.Seconds()
	if a.serviceE == 0 {
		a.serviceE = s
	} else {
		a.serviceE += alpha * (s - a.serviceE)
	}
	if float64(inflight)*2 < a.limit {
		return
	}
	if !a.cut {
		a.limit = min(a.limit+1, a.ceiling)
		return
	}
	var inc float64
	switch {
	case a.limit < a.refusedAt-1:
		inc = 1
	case a.limit < a.refusedAt:
		inc = probeStart
	default:
		inc = probeStart * math.Pow(2, math.Floor(a.rounds))
		inc = min(inc, a.limit) // never faster than slow start
		a.rounds += 1 / a.limit
	}
	a.limit = min(a.limit+inc/a.limit, a.ceiling)
}

// refused records a congestion signal for an attempt sent at sent; it
// reports whether the limit was cut.
func (a *aimd) refused(sent, now time.Time) bool {
	if a.cut && sent.Before(a.lastCut) {
		return false // sent before the last cut, which already accounted for it
	}
	a.refusedAt = a.limit
	a.limit = max(a.limit*backoffRatio, minLimit)
	a.cut, a.lastCut, a.rounds = true, now, 0
	return true
}

// service is the measured time per answer; 0 when nothing was answered yet.
func (a *aimd) service() time.Duration { return time.Duration(a.serviceE * float64(time.Second)) }

// rate is the measured service rate in answers per second: the faster of
// the rate at the current limit by Little's law (slots ÷ time per answer) and
// the rate at which the last answers came. The faster one, because a request
// admitted on an optimistic estimate still leaves the queue with a 429 before
// its deadline, while one refused on a pessimistic one is lost. 0 when
// unknown.
func (a *aimd) rate() float64 {
	if a.serviceE <= 0 {
		return 0
	}
	r := float64(a.slots()) / a.serviceE
	if a.n >= 8 {
		newest := a.recent[(a.next+rateRing-1)%rateRing]
		oldest := a.recent[(a.next+rateRing-a.n)%rateRing]
		if span := newest.Sub(oldest).Seconds(); span > 0 && time.Since(newest) < 2*time.Second {
			r = max(r, float64(a.n-1)/span)
		}
	}
	return r
}
