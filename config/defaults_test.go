package config

import (
	"slices"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/embedded"
	"github.com/breakwater-dev/breakwater/cache/qdrant"
	"github.com/breakwater-dev/breakwater/embed"
	"github.com/breakwater-dev/breakwater/lib/retry"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// TestDefaultsAgreeWithLibraries is the one-source-of-defaults check: a key
// left out of the file and a field left zero in a library's options mean the
// same value. They disagreed before (hardening audit): retry max delay 5s vs
// 10s, breaker min requests 10 vs 20, open-for 15s vs 30s, exact tier
// 256 MiB vs 64 MiB.
func TestDefaultsAgreeWithLibraries(t *testing.T) {
	c := Default()
	checks := []struct {
		name      string
		got, want any
	}{
		{"cache.threshold", float32(c.Cache.Threshold), float32(cache.DefaultThreshold)},
		{"cache.exact_max_bytes", int64(c.Cache.ExactMaxBytes), int64(cache.DefaultExactMaxBytes)},
		{"cache.write_queue", c.Cache.QueueSize, cache.DefaultQueueSize},
		{"cache.semantic.cross_user", c.Cache.Semantic.CrossUser, cache.DefaultCrossUser},
		{"vector.max_entries", c.Vector.MaxEntries, embedded.DefaultMaxEntries},
		{"vector.qdrant.url", c.Vector.Qdrant.Addr, qdrant.DefaultAddr},
		{"vector.qdrant.collection", c.Vector.Qdrant.Collection, qdrant.DefaultCollection},
		{"vector.qdrant.timeout", c.Vector.Qdrant.Timeout, qdrant.DefaultTimeout},
		{"embed.openai.timeout", c.Embed.OpenAI.Timeout, embed.DefaultOpenAITimeout},
		{"retry.max_attempts", c.Retry.MaxAttempts, upstream.DefaultMaxAttempts},
		{"retry.base_delay", c.Retry.BaseDelay, upstream.DefaultBaseDelay},
		{"retry.max_delay", c.Retry.MaxDelay, upstream.DefaultMaxDelay},
		{"retry.max_delay (embedder)", c.Retry.MaxDelay, embed.DefaultOpenAIMaxDelay},
		{"retry.deadline", c.Retry.Deadline, upstream.DefaultDeadline},
		{"retry.retry_on", slices.Equal(c.Retry.RetryOn, retry.DefaultStatuses) && slices.Equal(upstream.DefaultRetryOn, retry.DefaultStatuses), true},
		{"server.max_answer_bytes", c.Server.MaxAnswerBytes, int64(upstream.DefaultMaxAnswerBytes)},
		{"stream.max_duration", c.Stream.MaxStreamDuration, upstream.DefaultMaxStreamDuration},
		{"breaker.window", c.Breaker.Window, upstream.DefaultBreakerWindow},
		{"breaker.min_requests", c.Breaker.MinRequests, upstream.DefaultBreakerMinRequests},
		{"breaker.failure_ratio", c.Breaker.FailureRatio, upstream.DefaultBreakerFailureRatio},
		{"breaker.consecutive_failures", c.Breaker.ConsecutiveFailures, upstream.DefaultBreakerConsecutiveFailures},
		{"breaker.open_for", c.Breaker.OpenFor, upstream.DefaultBreakerOpenFor},
		{"breaker.half_open_probes", c.Breaker.HalfOpenProbes, upstream.DefaultBreakerHalfOpenProbes},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: config default %v, library default %v", ch.name, ch.got, ch.want)
		}
	}
	// The values decided in the audit, so a change is deliberate.
	if c.Retry.MaxDelay != 5*time.Second || c.Breaker.MinRequests != 20 || c.Breaker.OpenFor != 15*time.Second || c.Cache.ExactMaxBytes != 64*MiB {
		t.Errorf("decided defaults changed: max_delay %v, min_requests %d, open_for %v, exact_max_bytes %v",
			c.Retry.MaxDelay, c.Breaker.MinRequests, c.Breaker.OpenFor, c.Cache.ExactMaxBytes)
	}
}
