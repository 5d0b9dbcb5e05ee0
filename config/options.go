package config

import (
	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/embedded"
	"github.com/breakwater-dev/breakwater/cache/qdrant"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/embed"
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

// Options is [cache.verify] as the verifier's option, without what the
// composition root builds (the judge, its guard, metrics, pressure).
func (v VerifyConfig) Options() verify.Options {
	return verify.Options{
		MinSimilarity: float32(None(v.MinSimilarity)),
		Candidates:    None(v.Candidates),
		Timeout:       None(v.Timeout.D()),
		Concurrency:   None(v.Concurrency),
		NoVerdictMiss: v.NoVerdict == NoVerdictMiss || v.NoVerdict == "" && v.Judge == JudgeAuto,
	}
}

// OpenAIEmbedder is [embed.openai] as the embedder's option, without the
// key, which the composition root reads from the variable api_key_env
// names. Dimensions' 0 is the model's native size in both.
func (o OpenAIEmbedConfig) OpenAIEmbedder() embed.OpenAIOptions {
	return embed.OpenAIOptions{
		BaseURL:    o.BaseURL,
		Model:      o.Model,
		Dimensions: o.Dimensions,
		Timeout:    None(o.Timeout.D()),
	}
}

// Embedded is [vector] as the embedded index's option, without what the
// embedder decides (the dimension and its name) and the logger.
func (v VectorConfig) Embedded() embedded.Options {
	return embedded.Options{
		Path:          v.Path,
		MaxEntries:    None(v.MaxEntries),
		MaxBytes:      int64(None(v.MaxBytes)),
		MaxEntryBytes: int64(None(v.MaxEntryBytes)),
	}
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

// Options is [vector.qdrant] as the Qdrant index's option, without the
// key, which the composition root reads from the variable api_key_env
// names, and what the embedder and the cache decide (the dimension and its
// name, the partition secret's fingerprint, portable vectors).
func (q QdrantConfig) Options() qdrant.Options {
	return qdrant.Options{
		Addr:       q.URL,
		Collection: q.Collection,
		TLS:        q.TLS,
		Timeout:    None(q.Timeout.D()),
	}
}
