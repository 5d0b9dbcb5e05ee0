package upstream

import (
	"time"

	"github.com/breakwater-dev/breakwater/lib/retry"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// Defaults New applies to zero fields of RetryPolicy and BreakerOptions; the
// config package's defaults refer to these, so a file without the key and a
// library caller without the field get the same value.
const (
	// DefaultMaxAttempts is the attempts one target gets before fallback.
	DefaultMaxAttempts = 3
	// DefaultBaseDelay is the first backoff ceiling (retry.DefaultBaseDelay).
	DefaultBaseDelay = retry.DefaultBaseDelay
	// DefaultMaxDelay caps a computed backoff (retry.DefaultMaxDelay, 5s):
	// three attempts then cost at most about 10s of waiting on one target,
	// leaving most of the 60s deadline to the fallbacks.
	DefaultMaxDelay = retry.DefaultMaxDelay
	// DefaultDeadline bounds a whole request: attempts, waits, fallbacks.
	DefaultDeadline = 60 * time.Second

	// DefaultBreakerWindow is the rolling window of the failure ratio.
	DefaultBreakerWindow = 30 * time.Second
	// DefaultBreakerMinRequests is the sample the ratio rule needs: 20. At a
	// 20% background error rate, 10 samples reach a 0.5 ratio by chance 3.3%
	// of the time and 20 samples 0.26%; a dead target is caught sooner by
	// the consecutive-failure rule anyway.
	DefaultBreakerMinRequests = 20
	// DefaultBreakerFailureRatio opens the breaker at half the window failing.
	DefaultBreakerFailureRatio = 0.5
	// DefaultBreakerConsecutiveFailures opens it after 5 failures in a row.
	DefaultBreakerConsecutiveFailures = 5
	// DefaultBreakerOpenFor is how long an open breaker rejects: 15s. The
	// default deployment has a single target, where an open breaker refuses
	// every request; one half-open probe after 15s costs one request, while
	// 30s doubles every outage as clients see it.
	DefaultBreakerOpenFor = 15 * time.Second
	// DefaultBreakerHalfOpenProbes is how many probes a half-open breaker admits.
	DefaultBreakerHalfOpenProbes = 1
)

// Admission defaults: the lane package's (see there).
const (
	DefaultInitialLimit   = lane.DefaultInitialLimit
	ColdSlots             = lane.ColdSlots
	DefaultMaxConcurrency = lane.DefaultMaxConcurrency
	DefaultMaxQueue       = lane.DefaultMaxQueue
	DefaultRetryAfterCap  = lane.DefaultRetryAfterCap
)

// Shed reasons: the label of breakwater_upstream_shed_total and the keys of
// TargetStats.Sheds (lane.Shed…).
const (
	ShedQueueFull    = lane.ShedQueueFull
	ShedWaitBeyond   = lane.ShedWaitBeyond
	ShedQueueTimeout = lane.ShedQueueTimeout
	ShedRateLimited  = lane.ShedRateLimited
	ShedBreakerOpen  = lane.ShedBreakerOpen
	ShedRetryBudget  = lane.ShedRetryBudget
	ShedTooLarge     = lane.ShedTooLarge
)
