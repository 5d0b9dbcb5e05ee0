package breaker

import "github.com/breakwater-dev/breakwater/lib/setting"

// Validate reports every problem of b, each a *setting.Error naming its
// [breaker] key. A zero field is valid (its Default…); a negative
// FailureRatio or ConsecutiveFailures turns that rule off; any other
// negative field is refused.
func (b Options) Validate() error {
	var es setting.Errors
	if b.Window < 0 {
		es.Add("breaker.window", b.Window, "must be > 0")
	}
	if b.MinRequests < 0 {
		es.Add("breaker.min_requests", b.MinRequests, "must be >= 1")
	}
	if !(b.FailureRatio <= 1) {
		es.Add("breaker.failure_ratio", b.FailureRatio, "must be in (0, 1]")
	}
	if b.OpenFor < 0 {
		es.Add("breaker.open_for", b.OpenFor, "must be > 0")
	}
	if b.HalfOpenProbes < 0 {
		es.Add("breaker.half_open_probes", b.HalfOpenProbes, "must be >= 1")
	}
	return es.Err()
}
