package breaker

import "github.com/breakwater-dev/breakwater/lib/setting"

// Validate reports every problem of b, each a *setting.Error naming its
// [breaker] key. A zero field is valid (its Default…); a negative
// FailureRatio or ConsecutiveFailures turns that rule off; any other
// negative field is refused.
func (b Options) Validate() error {
	var es setting.Errors
	setting.Negative(&es, "breaker.window", b.Window, "must be > 0")
	setting.Negative(&es, "breaker.min_requests", b.MinRequests, "must be >= 1")
	if !(b.FailureRatio <= 1) {
		es.Add("breaker.failure_ratio", b.FailureRatio, "must be in (0, 1]")
	}
	setting.Negative(&es, "breaker.open_for", b.OpenFor, "must be > 0")
	setting.Negative(&es, "breaker.half_open_probes", b.HalfOpenProbes, "must be >= 1")
	return es.Err()
}
