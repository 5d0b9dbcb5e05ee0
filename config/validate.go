package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/lib/setting"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire/apis"
)

// Error is one invalid setting: the key, its value and what is allowed. Its
// message is one line, e.g.
//
//	config: cache.threshold = 1.5: must be in (0, 1]
//	config: upstreams[1].base_url is empty: set the upstream's API root, e.g. https://api.openai.com/v1
type Error struct {
	// Key is the TOML key, with indices for array entries
	// ("models[0].targets[1].upstream").
	Key string
	// Value is the offending value; an empty string reads "is empty".
	Value any
	// Problem says what is allowed.
	Problem string
	// Env is the environment variable the value came from (an override or
	// BREAKWATER_UPSTREAM_URL), empty when it came from the file or a
	// default: the message names it first, since that is what to fix.
	Env string
}

func (e *Error) Error() string {
	key := e.Key
	if e.Env != "" {
		key = e.Env + " (" + e.Key + ")"
	}
	return "config: " + setting.Format(key, e.Value, e.Problem)
}

// Validate checks every key and returns every problem found, each an *Error
// on its own line (errors.Join), in the order of the file's sections:
// start-up should fail with the whole list rather than one fix per restart.
// errors.As(err, &e) yields the first. nil means the configuration is usable.
// Validate does not fill defaults; see Load.
func (c *Config) Validate() error { return c.validate(&loaded{}) }

// validate is Validate with what Load knows of the values: the keys whose
// values came from the environment (key → variable), which errors then
// name, and the keys written as 0, whose options hold their negative value.
func (c *Config) validate(l *loaded) error {
	v := validator{env: l.env, zeros: l.zeros}
	c.validateServer(&v)
	c.validateCache(&v)
	// The proxy's options span [server], [cache] and [stream].
	v.lib(c, c.ProxyOptions().Validate())
	c.validateVector(&v)
	c.validateEmbed(&v)
	c.validateRetry(&v)
	c.validateBreaker(&v)
	upstreams := c.validateUpstreams(&v)
	c.validateModels(&v, upstreams)
	c.validatePrices(&v)
	c.validateFleet(&v)
	if e := c.Tracing.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("tracing.endpoint", e, `must be an http(s) URL of an OTLP/HTTP collector, e.g. "http://127.0.0.1:4318"`)
		}
	}
	switch {
	case len(c.Upstreams) == 0: // already reported; naming "none" adds nothing
	case c.DefaultUpstream == "":
		v.add("default_upstream", "", "set it to the upstream that serves unrouted models (have: %s)", upstreams)
	case !slices.Contains(upstreams, c.DefaultUpstream):
		v.add("default_upstream", c.DefaultUpstream, "no [[upstreams]] named %q (have: %s)", c.DefaultUpstream, upstreams)
	}
	names := apiNames()
	for _, api := range slices.Sorted(maps.Keys(c.APIUpstreams)) {
		up := c.APIUpstreams[api]
		switch {
		case !slices.Contains(names, api):
			v.add("api_upstreams."+api, up, "no wire API named %q (have: %s)", api, strings.Join(names, ", "))
		case up != "" && len(c.Upstreams) > 0 && !slices.Contains(upstreams, up):
			v.add("api_upstreams."+api, up, "no [[upstreams]] named %q (have: %s)", up, upstreams)
		}
	}
	return errors.Join(v.errs...)
}

type validator struct {
	errs  []error
	env   map[string]string // key → the variable its value came from
	zeros map[string]bool   // keys written as 0 (file.go)
}

func (v *validator) add(key string, value any, problem string, args ...any) {
	if v.zeros[key] && value != nil {
		value = reflect.Zero(reflect.TypeOf(value)).Interface() // the 0 written (file.go)
	}
	v.errs = append(v.errs, &Error{Key: key, Value: value, Problem: fmt.Sprintf(problem, args...), Env: v.env[key]})
}

// names prints a list of upstream names the way messages quote them.
type names []string

func (n names) String() string {
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

func (c *Config) validateServer(v *validator) {
	s := &c.Server
	hostPort(v, "server.listen", s.Listen, `must be host:port, e.g. "127.0.0.1:8080" or ":8080"`)
	envName(v, "server.admin_token_env", s.AdminTokenEnv)
	positive(v, "server.shutdown_timeout", s.ShutdownTimeout)
	if s.AdminListen != "" {
		hostPort(v, "server.admin_listen", s.AdminListen, `must be host:port, e.g. "127.0.0.1:9901", or "" to serve admin paths on server.listen`)
		if s.AdminListen == s.Listen && !strings.HasSuffix(s.Listen, ":0") {
			v.add("server.admin_listen", s.AdminListen, "must differ from server.listen")
		}
	}
	oneOf(v, "server.log_level", s.LogLevel, "debug", "info", "warn", "error")
	oneOf(v, "server.log_format", s.LogFormat, "json", "text")
}

func (c *Config) validateCache(v *validator) {
	s := &c.Cache
	v.lib(c, s.Options.Validate())
	nonNegative(v, "cache.exact_max_bytes", s.ExactMaxBytes, "must be >= 0 (0 disables the exact tier)")
	v.lib(c, cache.ValidatePartitionBy(s.PartitionBy))
	envName(v, "cache.partition_secret_env", s.PartitionSecretEnv)
	// Each threshold's own range is the libraries' rule (the proxy's, the
	// cache's); how the two compare is this file's.
	if inUnit(float64(s.Threshold)) && inUnit(float64(s.StaleThreshold)) && s.StaleThreshold > s.Threshold {
		v.add("cache.stale_threshold", s.StaleThreshold, "must be <= cache.threshold (%v): a stale answer is a fallback, not a stricter match", s.Threshold)
	}
	if s.DataDir == "" {
		v.add("cache.data_dir", s.DataDir, `set a writable directory for the partition secret and the vector index, e.g. "./data"`)
	}
	oneOf(v, "cache.semantic.cross_user", s.Semantic.CrossUser, CrossUserAgreed, CrossUserAny, CrossUserNever)
	c.validateVerify(v)
}

func (c *Config) validateVerify(v *validator) {
	s := &c.Cache.Verify
	oneOf(v, "cache.verify.judge", s.Judge, JudgeAuto, JudgeNone, JudgeRerank, JudgeLLM)
	if s.NoVerdict != "" {
		oneOf(v, "cache.verify.no_verdict", s.NoVerdict, NoVerdictMiss, NoVerdictThreshold)
	}
	if s.Judge == JudgeLLM && s.Model == "" {
		v.add("cache.verify.model", s.Model, `set the chat model the "llm" judge asks, e.g. "gpt-4o-mini"`)
	}
	if s.URL != "" {
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("cache.verify.url", s.URL, "must be an http(s) URL such as http://reranker:8000/v1 (the judge posts to URL/rerank)")
		}
	}
	envName(v, "cache.verify.api_key_env", s.APIKeyEnv)
	if s.MinScore > 1 {
		v.add("cache.verify.min_score", s.MinScore, "must be in [0, 1] (a reranker's relevance_score)")
	}
	v.lib(c, s.Options.Validate())
	if s.SampleRate < 0 || s.SampleRate > 1 {
		v.add("cache.verify.sample_rate", s.SampleRate, "must be in [0, 1] (0 turns sampling off)")
	}
	unitInterval(v, "cache.verify.answer_similarity", s.AnswerSimilarity)
}

func (c *Config) validateVector(v *validator) {
	s := &c.Vector
	switch s.Backend {
	case BackendEmbedded:
		if s.Path == "" {
			v.add("vector.path", s.Path, "set the embedded index's directory (default: <cache.data_dir>/vectors)")
		}
	case BackendQdrant:
		q := &s.Qdrant
		hostPort(v, "vector.qdrant.url", q.Addr, `must be Qdrant's gRPC address as host:port, e.g. "localhost:6334" (no scheme; set tls = true for TLS)`)
		if q.Collection == "" {
			v.add("vector.qdrant.collection", q.Collection, `set the collection name, e.g. "breakwater"`)
		}
	default:
		v.add("vector.backend", s.Backend, `must be "embedded" or "qdrant"`)
	}
	v.lib(c, s.Options.Validate())
	envName(v, "vector.qdrant.api_key_env", s.Qdrant.APIKeyEnv)
	v.lib(c, s.Qdrant.Options.Validate())
}

func (c *Config) validateEmbed(v *validator) {
	s := &c.Embed
	o := &s.OpenAI
	switch s.Provider {
	case ProviderBuiltin:
	case ProviderOpenAI:
		if o.BaseURL == "" {
			v.add("embed.openai.base_url", o.BaseURL, `required when embed.provider = "openai": the API root, e.g. https://api.openai.com/v1`)
		} else {
			v.lib(c, upstream.ValidateBaseURL("embed.openai.base_url", o.BaseURL))
		}
		if o.Model == "" {
			v.add("embed.openai.model", o.Model, `required when embed.provider = "openai", e.g. "text-embedding-3-small"`)
		}
	default:
		v.add("embed.provider", s.Provider, `must be "builtin" or "openai"`)
	}
	nonNegative(v, "embed.cache_bytes", s.CacheBytes, "must be >= 0 (0 disables the embedding cache)")
	envName(v, "embed.openai.api_key_env", o.APIKeyEnv)
	v.lib(c, o.OpenAIOptions.Validate())
}

func (c *Config) validateRetry(v *validator) {
	v.lib(c, c.Retry.Validate())
}

func (c *Config) validateBreaker(v *validator) {
	// The file has no "off" for the ratio rule (the option's negative).
	if s := &c.Breaker; s.FailureRatio < 0 {
		v.add("breaker.failure_ratio", s.FailureRatio, "must be in (0, 1]")
	}
	v.lib(c, c.Breaker.Validate())
}

// validateUpstreams checks [[upstreams]] and returns the declared names.
func (c *Config) validateUpstreams(v *validator) names {
	declared, err := upstream.ValidateUpstreams(c.callerUpstreams())
	v.lib(c, err)
	for i, u := range c.Upstreams {
		envName(v, fmt.Sprintf("upstreams[%d].api_key_env", i), u.APIKeyEnv)
	}
	return declared
}

func (c *Config) validateModels(v *validator, upstreams names) {
	v.lib(c, upstream.ValidateRoutes(c.routes(), upstreams))
}

// validatePrices checks that every price is a finite number >= 0.
func (c *Config) validatePrices(v *validator) {
	check := func(key string, p float64) {
		if !(p >= 0) || math.IsInf(p, 1) {
			v.add(key, p, "must be a price in USD per million tokens, >= 0")
		}
	}
	for i, m := range c.Models {
		check(fmt.Sprintf("models[%d].input_price", i), m.InputPrice)
		check(fmt.Sprintf("models[%d].output_price", i), m.OutputPrice)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Prices)) {
		if name == "" {
			v.add("prices", name, "a price needs the upstream model's name")
		}
		check(fmt.Sprintf("prices.%q.input", name), c.Prices[name].Input)
		check(fmt.Sprintf("prices.%q.output", name), c.Prices[name].Output)
	}
}

func positive(v *validator, key string, d Duration) {
	if d <= 0 {
		v.add(key, d, "must be > 0")
	}
}

func nonNegative(v *validator, key string, s Size, problem string) {
	if s < 0 {
		v.add(key, int64(s), "%s", problem)
	}
}

func unitInterval(v *validator, key string, f float64) {
	if !inUnit(f) {
		v.add(key, f, "must be in (0, 1]")
	}
}

// inUnit reports whether f is in (0, 1].
func inUnit(f float64) bool { return f > 0 && f <= 1 }

func oneOf(v *validator, key, value string, allowed ...string) {
	if !slices.Contains(allowed, value) {
		v.add(key, value, "must be %s", orList(allowed))
	}
}

func orList(allowed []string) string {
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = strconv.Quote(a)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func hostPort(v *validator, key, value, problem string) {
	host, port, err := net.SplitHostPort(value)
	if err != nil || strings.ContainsAny(host, "/ ") {
		v.add(key, value, "%s", problem)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add(key, value, "port must be a number in 0-65535")
	}
}

// envName checks a *_env key: it holds the NAME of a variable, and a value
// like "sk-…" is a key pasted in the wrong place (never echo it back).
func envName(v *validator, key, value string) {
	if value == "" || isEnvName(value) {
		return
	}
	v.errs = append(v.errs, fmt.Errorf("config: %s is not an environment variable name: it must name the variable that holds the secret (letters, digits, '_'), not the secret itself", key))
}

func isEnvName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// apiNames are the names of the registered wire APIs, the keys
// [api_upstreams] accepts.
func apiNames() []string {
	names := make([]string, 0, len(apis.All))
	for _, a := range apis.All {
		names = append(names, a.Name)
	}
	return names
}

// lib adds the problems a library option found (its Validate), each naming
// its key: the value shown is the file's (Config's, or the 0 written where
// the option holds its negative value: add), and the variable it came from
// is named as for every key.
func (v *validator) lib(c *Config, err error) {
	for _, e := range setting.List(err) {
		var se *setting.Error
		if !errors.As(e, &se) {
			v.errs = append(v.errs, fmt.Errorf("config: %w", e))
			continue
		}
		value := se.Value
		if own, ok := c.valueAt(se.Key); ok {
			value = own
		}

		v.add(se.Key, value, "%s", se.Problem)
	}
}

// valueAt returns the scalar value of a TOML key of c, with indices for
// array entries and map keys as parts ("upstreams[0].pools.batch.max_queue").
func (c *Config) valueAt(key string) (any, bool) {
	v := reflect.ValueOf(c).Elem()
	for part := range strings.SplitSeq(key, ".") {
		name, index, indexed := strings.Cut(strings.TrimSuffix(part, "]"), "[")
		switch v.Kind() {
		case reflect.Struct:
			f, ok := fieldByTag(v.Type(), name)
			if !ok {
				return nil, false
			}
			v = v.FieldByIndex(f.Index)
		case reflect.Map:
			v = v.MapIndex(reflect.ValueOf(name))
			if !v.IsValid() {
				return nil, false
			}
		default:
			return nil, false
		}
		if indexed {
			i, err := strconv.Atoi(index)
			if err != nil || v.Kind() != reflect.Slice || i < 0 || i >= v.Len() {
				return nil, false
			}
			v = v.Index(i)
		}
	}
	switch {
	case v.Type() == sizeType:
		return v.Int(), true
	case v.Type() == durationType:
		return v.Interface(), true
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int64, reflect.Float32, reflect.Float64, reflect.Bool:
		return v.Interface(), true
	}
	return nil, false
}
