package config

import (
	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// None carries the configuration's one meaning of zero to the libraries.
// A config key that allows 0 means "none" by it: no limit, no timeout, no
// wait, the trigger off (Config holds every default already, so a zero
// there is always a choice). A library option's zero means its Default…
// instead, and a negative value "none", or a value its Validate refuses
// where the key has no "none". Every config number that reaches a library
// option goes through None, so that a library rule judges the file's 0.
func None[T ~int | ~int64 | ~float64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

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

// Options is [cache] as the cache's option, without what the composition
// root builds (the tiers, the embedder and index, the guards, the
// verifier, the end users' secret).
func (c CacheConfig) Options() cache.Options {
	return cache.Options{
		Threshold:  float32(None(c.Threshold)),
		TTL:        None(c.TTL.D()),
		QueueSize:  None(c.WriteQueue),
		QueueBytes: int64(None(c.WriteQueueBytes)),
		CrossUser:  c.Semantic.CrossUser,
	}
}

// ProxyOptions is what [server], [cache] and [stream] set of the proxy's
// option, without what the composition root builds (the caller, the cache
// and its partitioner, the APIs and their pass-through, the models and
// prices, the admin token read from its variable, the observers).
func (c *Config) ProxyOptions() proxy.Options {
	return proxy.Options{
		EndUserHeader:        c.Cache.EndUserHeader,
		MaxBodyBytes:         int64(None(c.Server.MaxBodyBytes)),
		MaxBodyBytesInFlight: int64(None(c.Server.MaxBodyBytesInFlight)),
		ReadHeaderTimeout:    None(c.Server.ReadHeaderTimeout.D()),
		ReadTimeout:          None(c.Server.ReadTimeout.D()),
		WriteTimeout:         None(c.Server.WriteTimeout.D()),
		ConnIdleTimeout:      None(c.Server.IdleTimeout.D()),
		MaxConnections:       None(c.Server.MaxConnections),
		MaxStreamBytes:       int64(None(c.Stream.MaxBytes)),
		MaxEventBytes:        int(None(c.Stream.MaxEventBytes)),
		TTL:                  None(c.Cache.TTL.D()),
		MaxTemperature:       c.Cache.MaxTemperature,
		StaleIfError:         c.Cache.StaleIfError,
		StaleThreshold:       float32(None(c.Cache.StaleThreshold)),
		StoreMaxTokens:       c.Cache.StoreMaxTokens,
		Resume:               c.Stream.Resume,
		IdleTimeout:          None(c.Stream.IdleTimeout.D()),
		AdminAllowNoToken:    c.Server.AdminAllowNoToken,
	}
}
