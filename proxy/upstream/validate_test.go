package upstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/lib/setting"
)

// validOptions is a caller's options with every validated field set.
func validOptions() Options {
	return Options{
		Upstreams: []Upstream{
			{Name: "openai", BaseURL: "https://api.openai.com/v1", Timeout: time.Minute, MaxConcurrency: 8,
				Pools: map[string]PoolLimits{"batch": {MaxConcurrency: 2}}},
			{Name: "local", BaseURL: "http://127.0.0.1:8000/v1", Auth: AuthXAPIKey},
		},
		Routes: []Route{{Name: "gpt-4o-mini", Targets: []Target{
			{Upstream: "openai", Model: "gpt-4o-mini"}, {Upstream: "local", Priority: 1, Weight: 0.5}}}},
		Retry:   RetryPolicy{MaxAttempts: 2, BaseDelay: time.Second, MaxDelay: 2 * time.Second, Deadline: time.Minute, RetryOn: []int{429, 503}, RetryAfterCap: time.Minute},
		Breaker: BreakerOptions{Window: time.Minute, MinRequests: 5, FailureRatio: 0.3, OpenFor: time.Second, HalfOpenProbes: 2},
	}
}

// TestOptionsValidateNamesTheKey: each invalid option is one problem, a
// *setting.Error naming the field by its configuration key, and New
// refuses the options; the zero value of every field (its default) and a
// negative "none" are valid.
func TestOptionsValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(o *Options)
		want   string // the whole message
	}{
		{"max_attempts negative", func(o *Options) { o.Retry.MaxAttempts = -1 }, `retry.max_attempts = -1: must be >= 1 (1: no retry)`},
		{"max_delay below base_delay", func(o *Options) { o.Retry.MaxDelay = time.Millisecond }, `retry.max_delay = 1ms: must be >= retry.base_delay (1s)`},
		{"max_delay below default base_delay", func(o *Options) { o.Retry.BaseDelay, o.Retry.MaxDelay = 0, time.Millisecond }, `retry.max_delay = 1ms: must be >= retry.base_delay (200ms)`},
		{"deadline negative", func(o *Options) { o.Retry.Deadline = -1 }, `retry.deadline = -1ns: must be > 0`},
		{"retry_on 302", func(o *Options) { o.Retry.RetryOn = []int{302} }, `retry.retry_on[0] = 302: must be a 4xx or 5xx status`},
		{"retry_on 401", func(o *Options) { o.Retry.RetryOn = []int{429, 401} }, `retry.retry_on[1] = 401: is never retried: 400, 401, 403, 404, 409, 413 and 422 would fail the same way again`},
		{"retry_on twice", func(o *Options) { o.Retry.RetryOn = []int{503, 503} }, `retry.retry_on[1] = 503: listed twice`},
		{"retry_after_cap under 1s", func(o *Options) { o.Retry.RetryAfterCap = time.Millisecond }, `retry.retry_after_cap = 1ms: must be >= 1s`},
		{"window negative", func(o *Options) { o.Breaker.Window = -time.Second }, `breaker.window = -1s: must be > 0`},
		{"min_requests negative", func(o *Options) { o.Breaker.MinRequests = -1 }, `breaker.min_requests = -1: must be >= 1`},
		{"failure_ratio above 1", func(o *Options) { o.Breaker.FailureRatio = 1.5 }, `breaker.failure_ratio = 1.5: must be in (0, 1]`},
		{"open_for negative", func(o *Options) { o.Breaker.OpenFor = -time.Second }, `breaker.open_for = -1s: must be > 0`},
		{"half_open_probes negative", func(o *Options) { o.Breaker.HalfOpenProbes = -1 }, `breaker.half_open_probes = -1: must be >= 1`},
		{"upstream name", func(o *Options) { o.Upstreams[1].Name = "my local"; o.Routes[0].Targets = o.Routes[0].Targets[:1] }, `upstreams[1].name = "my local": must be letters, digits, '.', '_' or '-'`},
		{"upstream twice", func(o *Options) { o.Upstreams[1].Name = "openai"; o.Routes[0].Targets[1].Upstream = "openai" }, `upstreams[1].name = "openai": another [[upstreams]] has this name`},
		{"base_url endpoint", func(o *Options) { o.Upstreams[1].BaseURL = "http://127.0.0.1:8000/v1/chat/completions" }, `upstreams[1].base_url = "http://127.0.0.1:8000/v1/chat/completions": ends in the endpoint path "/chat/completions", which Breakwater appends to the API root itself (requests would go to http://127.0.0.1:8000/v1/chat/completions/chat/completions): use "http://127.0.0.1:8000/v1"`},
		{"auth", func(o *Options) { o.Upstreams[0].Auth = "basic" }, `upstreams[0].auth = "basic": must be "bearer", "x-api-key" or "x-goog-api-key"`},
		{"timeout negative", func(o *Options) { o.Upstreams[0].Timeout = -time.Second }, `upstreams[0].timeout = -1s: must be > 0`},
		{"max_concurrency negative", func(o *Options) { o.Upstreams[0].MaxConcurrency = -1 }, `upstreams[0].max_concurrency = -1: must be >= 1`},
		{"pool max_concurrency negative", func(o *Options) { o.Upstreams[0].Pools["batch"] = PoolLimits{MaxConcurrency: -1} }, `upstreams[0].pools.batch.max_concurrency = -1: must be >= 1`},
		{"route twice", func(o *Options) { o.Routes = append(o.Routes, o.Routes[0]) }, `models[1].name = "gpt-4o-mini": another [[models]] has this name`},
		{"route without targets", func(o *Options) { o.Routes[0].Targets = nil }, `models[0].targets is empty: add at least one {upstream = ..., model = ...}`},
		{"target upstream unknown", func(o *Options) { o.Routes[0].Targets[1].Upstream = "azure" }, `models[0].targets[1].upstream = "azure": no [[upstreams]] named "azure" (have: openai, local)`},
		{"target priority negative", func(o *Options) { o.Routes[0].Targets[1].Priority = -1 }, `models[0].targets[1].priority = -1: must be >= 0 (lower is tried first)`},
		{"target weight negative", func(o *Options) { o.Routes[0].Targets[1].Weight = -1 }, `models[0].targets[1].weight = -1: must be > 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			tt.mutate(&o)
			err := o.validate()
			if err == nil {
				t.Fatal("validate() = nil, want an error")
			}
			var problems []error
			for _, e := range setting.List(errors.Unwrap(err)) {
				problems = append(problems, setting.List(e)...)
			}
			var got []string
			for _, p := range problems {
				if p != nil {
					got = append(got, p.Error())
				}
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("problems = %q\nwant [%q]", got, tt.want)
			}
			var se *setting.Error
			if !errors.As(err, &se) || !strings.HasPrefix(tt.want, se.Key+" ") {
				t.Errorf("errors.As(*setting.Error) key = %v, want the key of %q", se, tt.want)
			}
			if _, err := New(o); err == nil {
				t.Error("New accepted the options")
			}
		})
	}

	// Zero is the default and a negative value "none" where one exists.
	o := validOptions()
	o.Retry = RetryPolicy{BaseDelay: -1, MaxDelay: -1, RetryOn: []int{}}
	o.Breaker = BreakerOptions{FailureRatio: -1, ConsecutiveFailures: -1}
	o.Retry.RetryAfterCap = 0
	o.Upstreams[0].Timeout, o.Upstreams[0].MaxConcurrency, o.Upstreams[0].MaxQueue = 0, 0, -1
	o.Routes[0].Targets[1].Weight = 0
	if err := o.validate(); err != nil {
		t.Errorf("validate() of zero and none fields = %v, want nil", err)
	}
}
