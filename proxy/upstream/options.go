// Package upstream calls model endpoints with routing, retries, backoff, circuit breakers, pacing and per-pool concurrency limits.
package upstream

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/proxy/upstream/breaker"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// The option types below are also the configuration file's [retry],
// [[upstreams]] and [[models]] keys (the toml tags): each field's comment is
// what an operator reads, and its Validate the rule (validate.go). A
// field's zero is its Default…, a negative value "none" where the comment
// says so. The file's 0 means "none" instead, or is refused: the zero tag
// says which (config turns a 0 the file writes into the field's negative
// value, which Validate judges), with the text of "none" for a key that
// allows it.

// Target is one place a requested model can be served from ([[models]]
// targets).
type Target struct {
	// Name labels the target in stats, metrics and logs; "" means Upstream+"/"+Model
	// (Upstream+"/*" when Model is empty). Routes that list the same name share one
	// breaker, pacer and set of counters, so the name must always mean the same
	// upstream and model.
	Name string `toml:"-"`
	// Upstream names a declared [[upstreams]] entry (Options.Upstreams).
	// Required.
	Upstream string `toml:"upstream"`
	// Model is the model name sent to that upstream (it replaces the body's
	// "model"). Empty: the configuration sets it to the [[models]] entry's
	// name; "" in Options sends the requested model unchanged.
	Model string `toml:"model"`
	// Priority orders targets: lower first; targets with equal priority
	// share traffic by Weight. Default 0. Must be >= 0.
	Priority int `toml:"priority"`
	// Weight is the share of traffic among healthy targets of the same
	// priority. Default 1 (DefaultWeight). Must be > 0.
	Weight float64 `toml:"weight" zero:"refused"`
}

// PoolLimits bounds one concurrency pool (a request Class) of an upstream
// ([upstreams.pools.<class>]).
type PoolLimits struct {
	// MaxConcurrency is this class's slots: how many attempts of this pool
	// may be in flight at once. Default: the upstream's MaxConcurrency.
	// Must be >= 1.
	MaxConcurrency int `toml:"max_concurrency" zero:"refused"`
	// MaxQueue is this class's queue: how many requests of this pool may
	// wait for a slot. Default: the upstream's MaxQueue. 0 in the file (a
	// negative value here): no waiting, shed at once when full.
	MaxQueue int `toml:"max_queue" zero:"0: no waiting"`
}

// Upstream is one model API endpoint (OpenAI-compatible, Anthropic, Gemini):
// an [[upstreams]] entry.
type Upstream struct {
	// Name identifies the upstream in [[models]] targets, default_upstream,
	// stats, metrics and the X-Breakwater-Upstream header. Required, unique,
	// letters, digits, '.', '_' and '-' only.
	Name string `toml:"name"`
	// BaseURL is the API root INCLUDING the version prefix, e.g.
	// "https://api.openai.com/v1"; a client's /v1/chat/completions goes to
	// BaseURL + "/chat/completions". Required; http or https. The
	// configuration trims a trailing slash.
	BaseURL string `toml:"base_url"`
	// APIKey is sent in the Auth style, replacing the client's credential headers
	// (Authorization, x-api-key, x-goog-api-key); "" forwards the client's headers
	// as they were sent. The configuration file names the variable that holds
	// it (api_key_env), never the key.
	APIKey string `toml:"-"`
	// Auth is how the key is sent: "bearer" (AuthBearer, the default:
	// Authorization: Bearer <key>), "x-api-key" (AuthXAPIKey, Anthropic) or
	// "x-goog-api-key" (AuthXGoogAPIKey, Gemini). Empty: "bearer".
	Auth string `toml:"auth"`
	// Timeout bounds one attempt: the whole exchange for Do, the time to
	// response headers for Open (streams). Default 60s in the configuration
	// (DefaultAttemptTimeout, UpstreamDefaults); 0 in Options means only the
	// request deadline bounds an attempt. Must be > 0 in the file.
	Timeout time.Duration `toml:"timeout" zero:"refused"`
	// MaxConcurrency is a ceiling, not the operating point: each lane of
	// this upstream (a target, or a target and forwarded key) finds its
	// concurrency limit at run time and never goes above it; it also bounds
	// the attempts of the default pool in flight at once. Default 256
	// (DefaultMaxConcurrency). Must be >= 1.
	MaxConcurrency int `toml:"max_concurrency" zero:"refused"`
	// MaxQueue is how many requests may wait for a slot of one lane (and of
	// the default pool); beyond it requests get 429 + Retry-After at once. A
	// request whose expected wait exceeds its deadline gets that 429
	// earlier. Default 1024 (DefaultMaxQueue). 0 in the file (a negative
	// value here): no waiting.
	MaxQueue int `toml:"max_queue" zero:"0: no waiting"`
	// Pools are per-class limits ([upstreams.pools.<class>]), chosen by a
	// request's X-Breakwater-Class (Request.Class, e.g. "realtime",
	// "batch"). Each pool has its own slots and queue, so filling one never
	// blocks another; the upstream sees at most the sum of its pools'
	// MaxConcurrency. A request without a class, or with a class not
	// listed, uses the default pool (MaxConcurrency/MaxQueue). nil: no
	// classes.
	Pools map[string]PoolLimits `toml:"pools,omitempty"`
}

// UpstreamDefaults is an [[upstreams]] entry's defaults, as a configuration
// file's entry gets them for the keys it leaves out: Options' own zero
// fields mean the same, except Timeout, whose zero is no per-attempt bound.
func UpstreamDefaults() Upstream {
	return Upstream{Timeout: DefaultAttemptTimeout, MaxConcurrency: DefaultMaxConcurrency, MaxQueue: DefaultMaxQueue}
}

// WithDefaults returns u with its zero limits at their defaults and its
// pools' zero limits at u's, as New reads them (Timeout's zero stays: no
// bound of its own).
func (u Upstream) WithDefaults() Upstream {
	if u.MaxConcurrency == 0 {
		u.MaxConcurrency = DefaultMaxConcurrency
	}
	if u.MaxQueue == 0 {
		u.MaxQueue = DefaultMaxQueue
	}
	if u.Pools != nil {
		pools := make(map[string]PoolLimits, len(u.Pools))
		for name, p := range u.Pools {
			if p.MaxConcurrency == 0 {
				p.MaxConcurrency = u.MaxConcurrency
			}
			if p.MaxQueue == 0 {
				p.MaxQueue = u.MaxQueue
			}
			pools[name] = p
		}
		u.Pools = pools
	}
	return u
}

// TargetDefaults is a [[models]] target's defaults for the keys a file
// leaves out.
func TargetDefaults() Target { return Target{Weight: DefaultWeight} }

// Route maps a requested model to its targets (a [[models]] entry).
type Route struct {
	// Name is the model a client requests (the body's "model"), e.g.
	// "gpt-4o". Required, unique.
	Name string `toml:"name"`
	// Targets serve the route, tried by ascending Priority, weighted within
	// a priority. At least one.
	Targets []Target `toml:"targets"`
}

// RetryPolicy bounds retries and waits ([retry]).
type RetryPolicy struct {
	// MaxAttempts is the number of tries per target (1 = no retry) before
	// falling back to the next target. Default 3 (DefaultMaxAttempts).
	MaxAttempts int `toml:"max_attempts" zero:"refused"`
	// BaseDelay is the first backoff step (exponential, full jitter).
	// Default 200ms (DefaultBaseDelay). 0 in the file (a negative value
	// here): retry at once.
	BaseDelay time.Duration `toml:"base_delay" zero:"0: retry at once"`
	// MaxDelay caps one computed backoff wait; must be >= BaseDelay.
	// Default 5s (DefaultMaxDelay); a negative value here: BaseDelay. A
	// server's Retry-After above it is honoured when the deadline leaves
	// room for it (lib/retry).
	MaxDelay time.Duration `toml:"max_delay" zero:"refused"`
	// Deadline bounds a whole request: every attempt, wait and fallback,
	// the wait in the queue included. The context's own deadline wins when
	// it comes first. Default 60s (DefaultDeadline).
	Deadline time.Duration `toml:"deadline" zero:"refused"`
	// RetryOn are the upstream statuses that are retried (connection errors
	// and timeouts always are). Default [429, 500, 502, 503, 504, 529]
	// (DefaultRetryOn; nil here). Only 4xx/5xx; 400, 401, 403, 404, 409, 413
	// and 422 are refused because the same request would fail the same
	// way (NeverRetry). Empty (non-nil): retry connection errors and
	// timeouts only.
	RetryOn []int `toml:"retry_on"`
	// RetryAfterCap bounds how long an upstream's Retry-After or rate-limit
	// reset holds a target (or a forwarded key's lane) back or delays a
	// retry. Default 5m (DefaultRetryAfterCap). Must be >= 1s
	// (MinRetryAfterCap).
	RetryAfterCap time.Duration `toml:"retry_after_cap" zero:"refused"`
}

// DefaultRetryPolicy is RetryPolicy with every field at its Default…, as a
// configuration file without the keys has it.
func DefaultRetryPolicy() RetryPolicy {
	p := RetryPolicy{}.withDefaults()
	p.RetryOn = slices.Clone(DefaultRetryOn)
	return p
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
	// Backoff computes the wait before a retry; nil means DefaultBackoff.
	Backoff Backoff
	// AnswerBound (MaxAnswerBytes) and StreamBound (MaxStreamDuration)
	// bound what an answer may take; 0 means the default, negative none.
	AnswerBound
	StreamBound
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
	if p.RetryAfterCap <= 0 {
		p.RetryAfterCap = DefaultRetryAfterCap
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
