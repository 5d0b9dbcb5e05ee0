package config

import (
	"github.com/breakwater-dev/breakwater/proxy"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// callerUpstreams is [[upstreams]] as the upstream caller's option,
// without the keys (APIKey), which the composition root reads from the
// variables api_key_env names.
func (c *Config) callerUpstreams() []upstream.Upstream {
	out := make([]upstream.Upstream, len(c.Upstreams))
	for i, u := range c.Upstreams {
		out[i] = u.Upstream
	}
	return out
}

// routes is [[models]] as the upstream caller's routes.
func (c *Config) routes() []upstream.Route {
	out := make([]upstream.Route, len(c.Models))
	for i, m := range c.Models {
		out[i] = m.Route
	}
	return out
}

// MissWithoutVerdict is [cache.verify] no_verdict as the verifier's
// NoVerdictMiss: "miss", or "" with the auto judge.
func (v VerifyConfig) MissWithoutVerdict() bool {
	return v.NoVerdict == NoVerdictMiss || v.NoVerdict == "" && v.Judge == JudgeAuto
}

// ProxyOptions is what [server], [cache] and [stream] set of the proxy's
// option, without what the composition root builds (the caller, the cache
// and its partitioner, the APIs and their pass-through, the models and
// prices, the admin token read from its variable, the observers).
func (c *Config) ProxyOptions() proxy.Options {
	return proxy.Options{
		ServerOptions: c.Server.ServerOptions,
		TTL:           c.Cache.TTL,
		CacheOptions:  c.Cache.CacheOptions,
		StreamOptions: c.Stream.StreamOptions,
	}
}
