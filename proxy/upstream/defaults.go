package upstream

import (
	"time"

	"github.com/breakwater-dev/breakwater/lib/retry"
	"github.com/breakwater-dev/breakwater/proxy/upstream/breaker"
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

	// The breaker's defaults (package breaker).
	DefaultBreakerWindow              = breaker.DefaultWindow
	DefaultBreakerMinRequests         = breaker.DefaultMinRequests
	DefaultBreakerFailureRatio        = breaker.DefaultFailureRatio
	DefaultBreakerConsecutiveFailures = breaker.DefaultConsecutiveFailures
	DefaultBreakerOpenFor             = breaker.DefaultOpenFor
	DefaultBreakerHalfOpenProbes      = breaker.DefaultHalfOpenProbes

	// DefaultWeight is a target's share within its priority when none is
	// given: targets of one priority share traffic evenly.
	DefaultWeight = 1.0
	// DefaultAttemptTimeout is the per-attempt bound a configured upstream
	// gets (Upstream.Timeout): the request deadline's length, so one attempt
	// may use the whole of it when nothing else is tried. The option's zero
	// is no bound of its own.
	DefaultAttemptTimeout = DefaultDeadline
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
