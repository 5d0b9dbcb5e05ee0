package upstream

import "testing"

// TestZeroOptionsGetTheExportedDefaults: what New applies to zero fields is
// what the exported Default constants say (the config package refers to
// them, so the two cannot drift apart again).
func TestZeroOptionsGetTheExportedDefaults(t *testing.T) {
	r := RetryPolicy{}.withDefaults()
	if r.MaxAttempts != DefaultMaxAttempts || r.BaseDelay != DefaultBaseDelay || r.MaxDelay != DefaultMaxDelay || r.Deadline != DefaultDeadline {
		t.Errorf("RetryPolicy{}.withDefaults() = %+v", r)
	}
	b := BreakerOptions{}.WithDefaults()
	want := BreakerOptions{Window: DefaultBreakerWindow, MinRequests: DefaultBreakerMinRequests, FailureRatio: DefaultBreakerFailureRatio,
		ConsecutiveFailures: DefaultBreakerConsecutiveFailures, OpenFor: DefaultBreakerOpenFor, HalfOpenProbes: DefaultBreakerHalfOpenProbes}
	if b != want {
		t.Errorf("BreakerOptions{}.WithDefaults() = %+v, want %+v", b, want)
	}
}
