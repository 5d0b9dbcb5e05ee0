package upstream

import "github.com/breakwater-dev/breakwater/proxy/upstream/breaker"

// State is a target's circuit breaker state; its value is the
// breaker_state metric.
type State = breaker.State

// Breaker states.
const (
	StateClosed   = breaker.StateClosed
	StateHalfOpen = breaker.StateHalfOpen
	StateOpen     = breaker.StateOpen
)

// verdict is what an attempt tells its target's breaker, weight and lane.
type verdict = breaker.Verdict

const (
	neutral   = breaker.Neutral
	success   = breaker.Success
	failure   = breaker.Failure
	congested = breaker.Congested
)

// probeKind tells the breaker how an attempt was admitted.
type probeKind = breaker.Probe

const (
	notProbe   = breaker.NotProbe
	halfOpen   = breaker.HalfOpen
	lastResort = breaker.LastResort
)
