// Package upstream calls model endpoints with routing, retries, backoff, circuit breakers, pacing and per-pool concurrency limits.
package upstream

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/proxy/upstream/breaker"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// Target is one place a requested model can be served from.
type Target struct {
	// Name labels the target in stats, metrics and logs; "" means Upstream+"/"+Model
	// (Upstream+"/*" when Model is empty). Routes that list the same name share one
	// breaker, pacer and set of counters, so the name must always mean the same
	// upstream and model.
	Name string
	// Upstream names an entry of Options.Upstreams. Required.
	Upstream string
	// Model replaces the body's "model" field; "" sends the requested model unchanged.
	Model string
	// Priority orders targets: lower numbers are tried first; targets with equal
	// priority share traffic by Weight.
	Priority int
	// Weight is the target's share within its priority; 0 means
	// DefaultWeight.
	Weight float64
}

// PoolLimits bounds one concurrency pool (a request Class) of an upstream.
type PoolLimits struct {
	// MaxConcurrency is how many attempts of this pool may be in flight at once;
	// 0 means the upstream's MaxConcurrency.
	MaxConcurrency int
	// MaxQueue is how many requests of this pool may wait for a slot; 0 means the
	// upstream's MaxQueue, a negative value means no queue (shed at once when full).
	MaxQueue int
}

// Upstream is one model API endpoint (OpenAI-compatible, Anthropic, Gemini).
type Upstream struct {
	// Name identifies the upstream in targets, stats and metrics. Required.
	Name string
	// BaseURL is the API root including the version, e.g. https://api.openai.com/v1.
	// A request path "/v1/chat/completions" is sent to BaseURL+"/chat/completions". Required.
	BaseURL string
	// APIKey is sent in the Auth style, replacing the client's credential headers
	// (Authorization, x-api-key, x-goog-api-key); "" forwards the client's headers
	// as they were sent.
	APIKey string
	// Auth is how APIKey is sent: AuthBearer, AuthXAPIKey or AuthXGoogAPIKey;
	// "" means DefaultAuth.
	Auth string
	// Timeout bounds one attempt: the whole exchange for Do, the time to response
	// headers for Open. 0 means only the request deadline bounds an attempt
	// (the configuration's default is DefaultAttemptTimeout).
	Timeout time.Duration
	// MaxConcurrency is the ceiling of the adaptive concurrency limit of each of
	// the upstream's lanes (a target, or a target and forwarded key), and of the
	// attempts of the default pool in flight at once; 0 means
	// DefaultMaxConcurrency. The limit itself is found at run time.
	MaxConcurrency int
	// MaxQueue is how many requests may wait for a slot of one lane, and of the
	// default pool; 0 means DefaultMaxQueue, a negative value means no queue.
	MaxQueue int
	// Pools gives request classes (Request.Class, e.g. "realtime", "batch") their own
	// slots and queue. Each pool is independent, so filling one never blocks another;
	// the upstream sees at most the sum of its pools' MaxConcurrency. Classes not
	// listed share the "default" pool. nil means one default pool.
	Pools map[string]PoolLimits
}

// Route maps a requested model to its targets.
type Route struct {
	// Name is the model a client asks for, e.g. "gpt-4o". Required.
	Name string
	// Targets serve the route, tried by priority. At least one is required.
	Targets []Target
}

// RetryPolicy bounds retries and waits.
type RetryPolicy struct {
	// MaxAttempts is how many attempts one target gets before the caller falls back to
	// the next; 0 means 3, 1 means no retries.
	MaxAttempts int
	// BaseDelay is the first backoff ceiling; 0 means 200ms, negative no
	// wait between attempts.
	BaseDelay time.Duration
	// MaxDelay caps a computed backoff (not a server's Retry-After, which is
	// honoured when the deadline leaves room: lib/retry); 0 means 5s,
	// negative BaseDelay (never less).
	MaxDelay time.Duration
	// Deadline bounds the whole request: every attempt, wait and fallback. The
	// context's own deadline wins when it comes first. 0 means 60s.
	Deadline time.Duration
	// RetryOn lists the HTTP statuses worth retrying; nil means
	// DefaultRetryOn, an empty non-nil list none (connection errors and
	// timeouts are retried either way).
	RetryOn []int
}

// BreakerOptions configure the per-target circuit breaker (package breaker).
type BreakerOptions = breaker.Options

// Options configure a Caller. Only Upstreams, and Routes or DefaultUpstream, are required.
type Options struct {
	// TracerProvider, when set, records a client span per attempt (GenAI
	// conventions) and a span per queue wait, and sends each attempt's
	// traceparent upstream. nil: no tracing, no cost.
	TracerProvider trace.TracerProvider
	// Upstreams are the APIs targets point at.
	Upstreams []Upstream
	// Routes map requested models to targets.
	Routes []Route
	// DefaultUpstream serves models that no route names (and requests without a
	// model), with the model unchanged; "" means such requests fail with ErrUnknownModel.
	DefaultUpstream string
	// Retry bounds retries and the request deadline.
	Retry RetryPolicy
	// Breaker configures every target's circuit breaker.
	Breaker BreakerOptions
	// CheckRetry decides whether an attempt is retried; nil means
	// RetryOnStatus(Retry.RetryOn), which is DefaultCheckRetry for the default list.
	CheckRetry CheckRetry
	// RetryAfterCap bounds how long an upstream's Retry-After or rate-limit
	// reset can hold a lane back or delay a retry; 0 means DefaultRetryAfterCap.
	RetryAfterCap time.Duration
	// Backoff computes the wait before a retry; nil means DefaultBackoff.
	Backoff Backoff
	// MaxAnswerBytes is the largest non-stream answer buffered whole; a
	// longer one comes back as Response.Rest. 0 means DefaultMaxAnswerBytes,
	// negative no limit.
	MaxAnswerBytes int64
	// MaxStreamDuration bounds a live stream, counted from the request's
	// start; never less than the request deadline. 0 means
	// DefaultMaxStreamDuration, negative: the request deadline alone.
	MaxStreamDuration time.Duration
	// Transport sends attempts; nil means a clone of http.DefaultTransport that
	// keeps many idle connections per host. Its own retry of a request on a
	// reused connection is limited to idempotent requests (net/http's
	// Request.isReplayable), so a POST is sent again only as a new attempt
	// the caller counts.
	Transport http.RoundTripper
	// Metrics receives counters and gauges; nil means no metrics.
	Metrics *Metrics
	// Logger receives one debug line per attempt and info lines on retries and
	// breaker changes, each with request_id, attempt and target; nil discards.
	Logger *slog.Logger
	// Now is the clock of breakers, pacing and stats; nil means time.Now. Waits and
	// the deadline always use real timers.
	Now func() time.Time
	// Seed, when set, is asked at the first request of each lane of a
	// target (the common lane and each forwarded key's; class pools share
	// them) by target name, for the fleet's estimate of that target: a
	// concurrency limit and a time per answer (0: unknown). A limit above 0
	// starts the lane there, past slow start, instead of probing from one
	// slot; 0 leaves the lane's own cold start. Its adaptive limit corrects
	// it from the first answer on (and the Gate's Share from its first
	// lease). nil: every lane starts cold. It must not block (package fleet
	// answers from its last heartbeat).
	Seed func(target string) (limit float64, perAnswer time.Duration)
	// Gate, when set, admits every attempt across a fleet of sidecars,
	// after its lane admitted it and before it is sent (package fleet: one
	// concurrency limit per lane, a target and forwarded key, learnt in
	// Redis). nil: the lanes alone.
	Gate Gate
	// Rand returns a number in [0, 1) for the weighted choice of targets and the
	// phase of a lane's sends after a Retry-After hold; it must be safe for
	// concurrent use. nil means math/rand/v2.Float64.
	Rand func() float64
}

// Defaults applied by New to zero fields.
const (
	defaultMaxAttempts = DefaultMaxAttempts
	defaultBaseDelay   = DefaultBaseDelay
	defaultMaxDelay    = DefaultMaxDelay
	defaultDeadline    = DefaultDeadline
	defaultPool        = lane.DefaultPool
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = defaultMaxAttempts
	}
	switch {
	case p.BaseDelay == 0:
		p.BaseDelay = defaultBaseDelay
	case p.BaseDelay < 0:
		p.BaseDelay = 0
	}
	switch {
	case p.MaxDelay == 0:
		p.MaxDelay = defaultMaxDelay
	case p.MaxDelay < 0:
		p.MaxDelay = 0 // raised to BaseDelay below
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	if p.Deadline <= 0 {
		p.Deadline = defaultDeadline
	}
	return p
}

func targetName(t Target) string {
	if t.Name != "" {
		return t.Name
	}
	if t.Model == "" {
		return t.Upstream + "/*"
	}
	return t.Upstream + "/" + t.Model
}

// Gate admits attempts across a fleet of sidecars that share one model
// (package fleet's capacity gate).
type Gate interface {
	// Acquire waits, within ctx and until sendBy, for the fleet's leave to
	// send one attempt on the lane name (the target's name, and "#" and the hash of
	// the forwarded key when the client's key is forwarded: lane.Key); rank
	// orders this replica's waiters
	// (lane.ClassRank). It returns the lease's release, to be called once
	// with the attempt's outcome (abandoned: its client went away before
	// the answer, and the model is still busy with it), or nil to go
	// without the gate (Redis down or slow: the lane alone decides). An
	// error says ctx ended or sendBy passed before a lease came.
	Acquire(ctx context.Context, name string, rank int, sendBy time.Time) (release func(o lane.Outcome, abandoned bool), err error)
	// Share is how many attempts this replica may hold on the lane name,
	// as the gate last said (0: unknown). The caller caps the lane's limit
	// at it after every lease (lane.Lane.Cap): a gated attempt's refusal
	// teaches the gate, not the lane, so without the cap a gated lane grows
	// with every answer, and sends at that limit the moment the gate goes.
	// It must not block.
	Share(name string) float64
}
