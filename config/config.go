// Package config loads, defaults, overrides from the environment and validates Breakwater's TOML configuration.
//
// The order is fixed: strict TOML decoding (an unknown key is an error), then
// defaults for every key the file leaves out, then BREAKWATER_<SECTION>_<KEY>
// environment overrides, then derived values (vector.path from cache.data_dir,
// a model's target model from its name, …), then Validate. Library packages
// never import this package: main turns a *Config into constructor arguments.
//
// Each setting is written once, in the library's options type where one
// can hold its section: [retry] is upstream.RetryPolicy, [breaker]
// breaker.Options, an [[upstreams]] entry embeds upstream.Upstream, a
// [[models]] entry upstream.Route, [vector] embedded.Options, [vector.qdrant]
// qdrant.Options, [embed.openai] embed.OpenAIOptions, [cache.verify]
// verify.Options, [stream] proxy.StreamOptions, [server]
// proxy.ServerOptions, [cache] cache.Options and proxy.CacheOptions,
// [fleet] fleet.StoreOptions and a [[budgets]] entry fleet.Budget. Their
// fields carry the keys (toml tags), the comments operators read, the
// defaults (the Default… constants, the types' Default… functions) and the
// rules (Validate, naming the key: lib/setting). [server] and [stream]
// also embed the caller's upstream.AnswerBound and upstream.StreamBound
// (max_answer_bytes, max_duration), which upstream.Options embeds too.
//
// Zero has one meaning, given in one place (file.go): a key the file or the
// environment writes as 0 whose field has a zero tag reaches the option as
// its negative value, "none" (no limit, no timeout, no wait, the trigger
// off) where the tag says what 0 means and a value Validate refuses where
// it says "refused"; a key left out keeps its default. So Config holds the
// options' own values (0: the default, negative: none) and the composition
// root (internal/app) passes them on unchanged.
//
// Each library's options validate themselves, naming the config key
// (lib/setting); Validate calls them and adds what only the file knows:
// the variable a value came from, the 0 that was written, and the checks
// across sections.
//
// config.example.toml at the repository root documents every key; a test
// fails when a key of Config is missing there.
package config

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/embedded"
	"github.com/breakwater-dev/breakwater/cache/qdrant"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/embed"
	"github.com/breakwater-dev/breakwater/fleet"
	"github.com/breakwater-dev/breakwater/proxy"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/upstream/breaker"
)

// Config is the whole configuration file. The zero value is not usable; start
// from Default or Load.
type Config struct {
	// Server is the HTTP listener and process-level settings ([server]).
	Server ServerConfig `toml:"server"`
	// Cache is the exact and semantic cache ([cache]).
	Cache CacheConfig `toml:"cache"`
	// Vector is the semantic tier's index ([vector]).
	Vector VectorConfig `toml:"vector"`
	// Embed is the text → vector encoder ([embed]).
	Embed EmbedConfig `toml:"embed"`
	// Retry is the per-target retry policy of the upstream caller ([retry]).
	Retry RetryConfig `toml:"retry"`
	// Breaker is the per-target circuit breaker ([breaker]).
	Breaker BreakerConfig `toml:"breaker"`
	// Stream is the handling of streamed (SSE) answers ([stream]).
	Stream StreamConfig `toml:"stream"`
	// Upstreams are the model endpoints ([[upstreams]]). Load gives a file
	// without any the same single "default" upstream as running without a
	// file. Validate needs at least one.
	Upstreams []Upstream `toml:"upstreams"`
	// Models route a requested model name to ordered targets ([[models]]).
	// Empty: every request goes to DefaultUpstream with its model unchanged.
	Models []Model `toml:"models,omitempty"`
	// DefaultUpstream receives requests for models not listed in Models and
	// every other /v1/* path. Empty: Load sets it when exactly one upstream
	// is declared; otherwise Validate rejects it.
	DefaultUpstream string `toml:"default_upstream"`
	// APIUpstreams names each wire API's home upstream by the API's
	// registered name ([api_upstreams], proxy/wire/apis.All): the upstream
	// that serves, through the caller, the API's requests for a model not
	// listed in Models, and that receives as they are the requests the API
	// claims outside its cached routes (pass-through). An API not listed:
	// DefaultUpstream.
	APIUpstreams map[string]string `toml:"api_upstreams,omitempty"`
	// Prices are USD per million tokens by upstream model (the model a
	// target sends upstream), for the cost /stats shows beside the tokens
	// saved and spent ([prices]). A model without a price shows tokens
	// alone: prices are never guessed and never fetched. An entry here
	// wins over a [[models]] entry's input_price/output_price.
	Prices map[string]Price `toml:"prices,omitempty"`
	// Tracing exports OpenTelemetry traces ([tracing]). Off by default.
	Tracing TracingConfig `toml:"tracing"`
	// Fleet is what replicas share ([fleet]): the budgets' Redis.
	Fleet fleet.StoreOptions `toml:"fleet"`
	// Budgets cap what tenants and classes send upstream ([[budgets]]).
	Budgets []fleet.Budget `toml:"budgets,omitempty"`
}

// Price is one model's price in USD per million tokens.
type Price struct {
	// Input is the price of a million input (prompt) tokens. >= 0.
	Input float64 `toml:"input"`
	// Output is the price of a million output (generated) tokens. >= 0.
	Output float64 `toml:"output"`
}

// TracingConfig is [tracing]: OpenTelemetry traces over OTLP/HTTP.
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP collector's base URL (the exporter posts to
	// <endpoint>/v1/traces), e.g. "http://127.0.0.1:4318". Default "": off,
	// unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// is set; the standard OTEL_* variables (headers, timeout, sampler,
	// service name, resource attributes) are honoured either way.
	Endpoint string `toml:"endpoint"`
}

// ServerConfig is [server].
type ServerConfig struct {
	// Listen is the host:port to serve on. Default "127.0.0.1:8080" (a
	// sidecar answers its neighbour, not the network); ":8080" listens on
	// every interface.
	Listen string `toml:"listen"`
	// The proxy's limits: max_body_bytes, max_body_bytes_in_flight,
	// read_header_timeout, read_timeout, write_timeout, idle_timeout,
	// max_connections, admin_allow_no_token.
	proxy.ServerOptions
	// The caller's bound on a buffered answer: max_answer_bytes.
	upstream.AnswerBound
	// AdminTokenEnv names the environment variable holding the bearer token
	// for /admin/*. Default "BREAKWATER_ADMIN_TOKEN". When the variable (or
	// this key) is empty, /admin/* refuses every request unless
	// AdminAllowNoToken.
	AdminTokenEnv string `toml:"admin_token_env"`
	// AdminListen moves /stats, /metrics, /dashboard and /admin/* to a
	// listener of their own (host:port), off the API port. Default "": one
	// listener serves everything.
	AdminListen string `toml:"admin_listen"`
	// ShutdownTimeout bounds graceful shutdown (drain requests, flush index
	// writes). Default 15s.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// LogLevel is "debug", "info" (default), "warn" or "error".
	LogLevel string `toml:"log_level"`
	// LogFormat is "json" (default) or "text".
	LogFormat string `toml:"log_format"`
}

// CacheConfig is [cache].
type CacheConfig struct {
	// Enabled turns both tiers on. Default true; false makes Breakwater a
	// resilient proxy only (every request is "bypass").
	Enabled bool `toml:"enabled"`
	// The cache's options: ttl, threshold, write_queue, write_queue_bytes.
	cache.Options
	// The proxy's: end_user_header, max_temperature, stale_if_error,
	// stale_threshold, store_max_tokens.
	proxy.CacheOptions
	// ExactMaxBytes is the exact tier's memory budget. Default 64 MiB.
	// 0 disables the exact tier.
	ExactMaxBytes Size `toml:"exact_max_bytes"`
	// PartitionBy lists what separates tenants: "authorization" (HMAC of the
	// Authorization header), "namespace" (X-Breakwater-Namespace) and
	// "header:<Name>". Default ["authorization", "namespace"]. An empty list
	// means one cache shared by every client (explicit opt-in).
	PartitionBy []string `toml:"partition_by"`
	// PartitionSecretEnv names the environment variable holding the HMAC
	// secret for partitions. Default "BREAKWATER_PARTITION_SECRET". When the
	// variable (or this key) is empty, a secret is generated once and kept
	// in DataDir; replicas sharing a Qdrant collection must share the secret.
	PartitionSecretEnv string `toml:"partition_secret_env"`
	// DataDir holds the generated partition secret and the embedded vector
	// index. Default "./data" (relative to the working directory).
	DataDir string `toml:"data_dir"`
	// Semantic is the semantic tier's scope between end users
	// ([cache.semantic]).
	Semantic SemanticConfig `toml:"semantic"`
	// Verify is the judge of semantic candidates and the live false-hit
	// estimate ([cache.verify]).
	Verify VerifyConfig `toml:"verify"`
}

// Cross-user scopes for [cache.semantic] cross_user.
const (
	CrossUserAgreed = cache.CrossUserAgreed
	CrossUserAny    = cache.CrossUserAny
	CrossUserNever  = cache.CrossUserNever
)

// SemanticConfig is [cache.semantic].
type SemanticConfig struct {
	// CrossUser says when an entry one end user created is served
	// semantically to another end user of the same partition: "agreed"
	// (default, cache.DefaultCrossUser: once a second user's miss drew
	// the same answer from the model, or the judge verified the pair),
	// "any" (always) or "never". Exact hits are not scoped.
	CrossUser string `toml:"cross_user"`
}

// Judges for [cache.verify] judge.
const (
	JudgeNone   = verify.JudgeNone
	JudgeRerank = verify.JudgeRerank
	JudgeLLM    = verify.JudgeLLM
	JudgeAuto   = verify.JudgeAuto
)

// What [cache.verify] no_verdict makes of a candidate without a verdict.
const (
	NoVerdictMiss      = verify.NoVerdictMiss
	NoVerdictThreshold = verify.NoVerdictThreshold
)

// VerifyConfig is [cache.verify]: the verifier's options, and the judge
// the composition root builds.
type VerifyConfig struct {
	verify.Options
	// Judge checks semantic candidates at or above MinSimilarity: "auto"
	// (default: a short call to the model of the request's own route, with its
	// credentials; a [[models]] judge_model may name a cheaper one), "none"
	// (the static threshold alone), "rerank" (a Cohere-compatible POST
	// {URL}/rerank) or "llm" (a small chat model through the caller).
	Judge string `toml:"judge"`
	// NoVerdict is what a candidate the judge could not rule on (busy,
	// slow, refused, unparsable) becomes: "miss", or "threshold" (the static
	// threshold and the strict guard decide). Empty (default): "miss" for
	// auto, "threshold" for rerank and llm.
	NoVerdict string `toml:"no_verdict"`
	// URL is the reranker's API root. Empty: the default upstream's base_url
	// (vLLM and Infinity serve /rerank beside /chat/completions).
	URL string `toml:"url"`
	// Model is the reranker's or the chat model's name. Empty: a rerank
	// default (verify.DefaultRerankModel); required for "llm".
	Model string `toml:"model"`
	// APIKeyEnv names the environment variable holding the reranker's key.
	// Empty: with URL empty, the default upstream's key; otherwise none.
	APIKeyEnv string `toml:"api_key_env"`
	// MinScore accepts a reranker relevance_score at or above it. Default
	// 0.5. 0: no minimum.
	MinScore float64 `toml:"min_score" zero:"0: no minimum"`
	// SampleRate is the share of would-be semantic hits answered fresh to
	// estimate the false-hit rate, in [0, 1]. Default 0.02
	// (verify.DefaultSampleRate); 0 turns sampling off.
	SampleRate float64 `toml:"sample_rate"`
	// AnswerSimilarity is the encoder similarity at or above which two
	// unequal answers count as the same, in (0, 1]; 1 means text equality
	// only. Default 0.95.
	AnswerSimilarity float64 `toml:"answer_similarity"`
}

// VectorConfig is [vector].
type VectorConfig struct {
	// Backend is "embedded" (default: in-process, persisted under Path) or
	// "qdrant" (see Qdrant).
	Backend string `toml:"backend"`
	// The embedded index's options: path, max_entries, max_bytes,
	// max_entry_bytes.
	embedded.Options
	// Qdrant is used only when Backend is "qdrant" ([vector.qdrant]).
	Qdrant QdrantConfig `toml:"qdrant"`
}

// QdrantConfig is [vector.qdrant]: the Qdrant index's options, and the
// name of the variable holding its key.
type QdrantConfig struct {
	qdrant.Options
	// APIKeyEnv names the environment variable holding Qdrant's API key.
	// Empty (default): no key is sent.
	APIKeyEnv string `toml:"api_key_env"`
}

// EmbedConfig is [embed].
type EmbedConfig struct {
	// Provider is "builtin" (default: the bundled sentence encoder, pure Go)
	// or "openai" (any OpenAI-compatible /v1/embeddings, see OpenAI).
	Provider string `toml:"provider"`
	// CacheBytes is the memory budget of the text → vector cache. Default
	// 32 MiB. 0 disables it.
	CacheBytes Size `toml:"cache_bytes"`
	// PortableVectors turns off the built-in encoder's bf16 kernel, so that
	// every amd64 CPU embeds a text to the same vector (replicas on mixed
	// CPUs sharing one Qdrant cache). Default false: the bf16 kernel where
	// the CPU has AVX512_BF16, vectors within ~1e-3 of the others.
	PortableVectors bool `toml:"portable_vectors"`
	// OpenAI is used only when Provider is "openai" ([embed.openai]).
	OpenAI OpenAIEmbedConfig `toml:"openai"`
}

// OpenAIEmbedConfig is [embed.openai]: the embedder's options, and the
// name of the variable holding its key.
type OpenAIEmbedConfig struct {
	embed.OpenAIOptions
	// APIKeyEnv names the environment variable holding the API key. Empty
	// (default): no Authorization header (fine for local servers).
	APIKeyEnv string `toml:"api_key_env"`
}

// RetryConfig is [retry]: the upstream caller's retry policy, the cap of
// its holds included.
type RetryConfig = upstream.RetryPolicy

// BreakerConfig is [breaker]: the per-target circuit breaker's options.
type BreakerConfig = upstream.BreakerOptions

// StreamConfig is [stream]: the proxy's stream options, and the caller's
// bound of a stream's time (max_duration).
type StreamConfig struct {
	proxy.StreamOptions
	upstream.StreamBound
}

// Upstream is one [[upstreams]] entry: a model API endpoint (OpenAI-compatible,
// Anthropic or Gemini; Auth picks how the key is sent). Its keys are the
// upstream caller's, and the name of the variable holding the key.
type Upstream struct {
	upstream.Upstream
	// APIKeyEnv names the environment variable holding this upstream's key,
	// sent as Auth says, in place of the client's credential headers. Empty
	// (default): the client's own Authorization / x-api-key headers are
	// forwarded as sent.
	APIKeyEnv string `toml:"api_key_env"`
}

// Pool is one [upstreams.pools.<class>] entry.
type Pool = upstream.PoolLimits

// Model is one [[models]] entry: a model name clients ask for and where it
// is served (the upstream caller's route), and what only the sidecar
// reads of it.
type Model struct {
	upstream.Route
	// CacheGroup lets models share cache entries: models with the same group
	// have the same context fingerprint. Empty: Load sets it to Name (no
	// sharing).
	CacheGroup string `toml:"cache_group"`
	// InputPrice and OutputPrice are USD per million input and output
	// tokens of this model: the answers of the targets that send the
	// model's own name upstream (a fallback to another model is priced
	// by [prices] only). 0 and 0: no price. >= 0.
	InputPrice  float64 `toml:"input_price"`
	OutputPrice float64 `toml:"output_price"`
	// JudgeModel is the model the auto judge ([cache.verify] judge =
	// "auto") asks about this model's semantic candidates, sent to this
	// model's targets (a target serving another model is asked with its
	// own): a cheaper model of the same provider, as targets name smaller
	// fallbacks. Empty: the model itself.
	JudgeModel string `toml:"judge_model"`
}

// ModelPrices are the prices by upstream model that [prices] and the
// [[models]] entries' input_price/output_price give, [prices] first.
func (c *Config) ModelPrices() map[string]Price {
	out := map[string]Price{}
	for _, m := range c.Models {
		if m.InputPrice == 0 && m.OutputPrice == 0 {
			continue
		}
		for _, t := range m.Targets {
			if t.Model == m.Name || t.Model == "" {
				out[m.Name] = Price{Input: m.InputPrice, Output: m.OutputPrice}
			}
		}
	}
	for name, p := range c.Prices {
		out[name] = p
	}
	return out
}

// Target is one entry of a model's targets.
type Target = upstream.Target

// The no-file upstream (an [[upstreams]] entry's other defaults are
// upstream.UpstreamDefaults, a target's upstream.TargetDefaults).
const (
	// DefaultUpstreamURL is the upstream used without a config file when
	// BREAKWATER_UPSTREAM_URL is unset.
	DefaultUpstreamURL = "https://api.openai.com/v1"
	// UpstreamURLEnv sets the base_url of the implicit "default" upstream
	// (no file, or a file without [[upstreams]]).
	UpstreamURLEnv = "BREAKWATER_UPSTREAM_URL"

	defaultUpstreamName     = "default"
	defaultVectorsDirectory = "vectors"
)

// Default returns a complete, valid configuration: every key at its
// documented default and one upstream named "default" pointing at
// DefaultUpstreamURL that forwards the client's Authorization header.
func Default() *Config {
	c := defaults()
	c.Upstreams = []Upstream{implicitUpstream(DefaultUpstreamURL)}
	c.finish()
	return c
}

// defaults is Default without upstreams and without derived values; Load
// decodes a file over it so absent section keys keep their defaults.
func defaults() *Config {
	return &Config{
		Fleet: fleet.DefaultStoreOptions(),
		Server: ServerConfig{
			Listen:          "127.0.0.1:8080",
			ServerOptions:   proxy.DefaultServerOptions(),
			AnswerBound:     upstream.DefaultAnswerBound(),
			AdminTokenEnv:   "BREAKWATER_ADMIN_TOKEN",
			ShutdownTimeout: Duration(15 * time.Second),
			LogLevel:        "info",
			LogFormat:       "json",
		},
		Cache: CacheConfig{
			Enabled: true,
			Options: cache.Options{
				Threshold:  cache.DefaultThreshold,
				TTL:        proxy.DefaultTTL,
				QueueSize:  cache.DefaultQueueSize,
				QueueBytes: cache.DefaultQueueBytes,
			},
			ExactMaxBytes:      Size(cache.DefaultExactMaxBytes),
			PartitionBy:        []string{PartitionAuthorization, PartitionNamespace},
			PartitionSecretEnv: "BREAKWATER_PARTITION_SECRET",
			CacheOptions:       proxy.DefaultCacheOptions(),
			DataDir:            "./data",
			Semantic:           SemanticConfig{CrossUser: cache.DefaultCrossUser},
			Verify: VerifyConfig{
				Options: verify.Options{
					MinSimilarity: verify.DefaultMinSimilarity,
					Candidates:    verify.DefaultCandidates,
					Timeout:       verify.DefaultTimeout,
					Concurrency:   verify.DefaultConcurrency,
				},
				Judge:            JudgeAuto,
				MinScore:         verify.DefaultMinScore,
				SampleRate:       verify.DefaultSampleRate,
				AnswerSimilarity: verify.DefaultAnswerSimilarity,
			},
		},
		Vector: VectorConfig{
			Backend: BackendEmbedded,
			Options: embedded.Options{
				MaxEntries:    embedded.DefaultMaxEntries,
				MaxBytes:      embedded.DefaultMaxBytes,
				MaxEntryBytes: embedded.DefaultMaxEntryBytes,
			},
			Qdrant: QdrantConfig{Options: qdrant.Options{
				Addr:       qdrant.DefaultAddr,
				Collection: qdrant.DefaultCollection,
				Timeout:    qdrant.DefaultTimeout,
			}},
		},
		Embed: EmbedConfig{
			Provider:   ProviderBuiltin,
			CacheBytes: embed.DefaultCacheBytes,
			OpenAI: OpenAIEmbedConfig{
				OpenAIOptions: embed.OpenAIOptions{Timeout: embed.DefaultOpenAITimeout},
			},
		},
		Retry:   upstream.DefaultRetryPolicy(),
		Breaker: breaker.DefaultOptions(),
		Stream:  StreamConfig{StreamOptions: proxy.DefaultStreamOptions(), StreamBound: upstream.DefaultStreamBound()},
	}
}

func implicitUpstream(baseURL string) Upstream {
	u := Upstream{Upstream: upstream.UpstreamDefaults()}
	u.Name, u.BaseURL = defaultUpstreamName, baseURL
	return u
}

// finish fills values derived from other keys. It runs after environment
// overrides so that, e.g., BREAKWATER_CACHE_DATA_DIR moves vector.path too.
func (c *Config) finish() {
	if c.Vector.Path == "" && c.Cache.DataDir != "" {
		c.Vector.Path = filepath.Join(c.Cache.DataDir, defaultVectorsDirectory)
	}
	if c.DefaultUpstream == "" && len(c.Upstreams) == 1 {
		c.DefaultUpstream = c.Upstreams[0].Name
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		u.BaseURL = strings.TrimRight(u.BaseURL, "/")
		u.Upstream = u.WithDefaults() // a pool's limits left out: the upstream's
	}
	for i := range c.Models {
		m := &c.Models[i]
		if m.CacheGroup == "" {
			m.CacheGroup = m.Name
		}
		for j := range m.Targets {
			if m.Targets[j].Model == "" {
				m.Targets[j].Model = m.Name
			}
		}
	}
}

// Upstream returns the upstream named name.
func (c *Config) Upstream(name string) (Upstream, bool) {
	for _, u := range c.Upstreams {
		if u.Name == name {
			return u, true
		}
	}
	return Upstream{}, false
}

// Allowed values of enumerated keys.
const (
	BackendEmbedded = "embedded"
	BackendQdrant   = "qdrant"

	ProviderBuiltin = "builtin"
	ProviderOpenAI  = "openai"

	PartitionAuthorization = "authorization"
	PartitionNamespace     = "namespace"
	// PartitionHeaderPrefix starts a partition_by item naming a request
	// header, e.g. "header:X-Tenant-ID".
	PartitionHeaderPrefix = "header:"
)

// Duration is a time.Duration written as a Go duration string ("200ms",
// "1m30s") in TOML and in environment overrides. A bare TOML integer is
// refused by Load (it would silently mean nanoseconds).
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("invalid duration %q: %s", b, durationHint)
	}
	*d = Duration(v)
	return nil
}

const durationHint = `must be a Go duration string such as "200ms", "5s" or "1m30s"`

// Size is a byte count written as a TOML integer (4194304) or a string with a
// unit ("4MiB", "512KiB", "1GiB"; "KB"/"MB"/"GB" are powers of 1000).
type Size int64

// Byte-size units.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
)

var sizeUnits = []struct {
	suffix string
	mult   Size
}{
	// Longest suffixes first so "MiB" is not read as "B".
	{"KiB", KiB}, {"MiB", MiB}, {"GiB", GiB},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

// String formats s with the largest binary unit that divides it exactly.
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		mult   Size
	}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if s != 0 && s%u.mult == 0 {
			return strconv.FormatInt(int64(s/u.mult), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// MarshalText implements encoding.TextMarshaler.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Size) UnmarshalText(b []byte) error {
	text := strings.TrimSpace(string(b))
	num, mult := text, Size(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(text, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(text, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || (mult > 1 && (n > int64(1<<63-1)/int64(mult) || n < -int64(1<<63-1)/int64(mult))) {
		return fmt.Errorf("invalid size %q: %s", b, sizeHint)
	}
	*s = Size(n) * mult
	return nil
}

const sizeHint = `must be a byte count such as 4194304 or "4MiB"`
