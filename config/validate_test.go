package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/fleet"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// validConfig is Default with two upstreams and a model routed to both, the
// base every validation case breaks in exactly one way.
func validConfig() *Config {
	c := Default()
	openai, local := Upstream{Upstream: upstream.UpstreamDefaults()}, Upstream{Upstream: upstream.UpstreamDefaults()}
	openai.Name, openai.BaseURL, openai.APIKeyEnv = "openai", "https://api.openai.com/v1", "OPENAI_API_KEY"
	openai.MaxConcurrency, openai.MaxQueue = 64, 256
	openai.Pools = map[string]Pool{"realtime": {MaxConcurrency: 8, MaxQueue: -1}}
	local.Name, local.BaseURL, local.MaxConcurrency, local.MaxQueue = "local", "http://localhost:8000/v1", 8, 32
	c.Upstreams = []Upstream{openai, local}
	c.Models = []Model{{
		Route: upstream.Route{
			Name: "gpt-4o-mini",
			Targets: []Target{
				{Upstream: "openai", Model: "gpt-4o-mini", Weight: 1},
				{Upstream: "local", Model: "qwen2.5-7b", Priority: 1, Weight: 1},
			},
		},
		CacheGroup: "gpt-4o-mini",
	}}
	c.DefaultUpstream = "openai"
	return c
}

func TestValidConfigIsValid(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v, want nil", err)
	}
}

// joined returns the errors Validate joined.
func joined(t *testing.T, err error) []error {
	t.Helper()
	if err == nil {
		t.Fatal("Validate() = nil, want an error")
	}
	u, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Validate() = %T, want errors.Join of problems", err)
	}
	return u.Unwrap()
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string // the whole line, or its start when it ends with "…"
	}{
		// [server]
		{"listen without port", func(c *Config) { c.Server.Listen = "8080" },
			`config: server.listen = "8080": must be host:port, e.g. "127.0.0.1:8080" or ":8080"`},
		{"listen url", func(c *Config) { c.Server.Listen = "http://localhost:8080" },
			`config: server.listen = "http://localhost:8080": must be host:port…`},
		{"listen port out of range", func(c *Config) { c.Server.Listen = "127.0.0.1:70000" },
			`config: server.listen = "127.0.0.1:70000": port must be a number in 0-65535`},
		{"listen named port", func(c *Config) { c.Server.Listen = "localhost:http" },
			`config: server.listen = "localhost:http": port must be a number in 0-65535`},
		{"admin token value instead of name", func(c *Config) { c.Server.AdminTokenEnv = "s3cr3t-token" },
			`config: server.admin_token_env is not an environment variable name: …`},
		{"zero shutdown_timeout", func(c *Config) { c.Server.ShutdownTimeout = 0 },
			`config: server.shutdown_timeout = 0s: must be > 0`},
		{"negative read_header_timeout", func(c *Config) { c.Server.ReadHeaderTimeout = -time.Second },
			`config: server.read_header_timeout = -1s: must be > 0`},
		{"log_level", func(c *Config) { c.Server.LogLevel = "verbose" },
			`config: server.log_level = "verbose": must be "debug", "info", "warn" or "error"`},
		{"log_format", func(c *Config) { c.Server.LogFormat = "xml" },
			`config: server.log_format = "xml": must be "json" or "text"`},

		// [cache]
		{"threshold above 1", func(c *Config) { c.Cache.Threshold = 1.5 },
			`config: cache.threshold = 1.5: must be in (0, 1]`},
		{"threshold negative", func(c *Config) { c.Cache.Threshold = -0.2 },
			`config: cache.threshold = -0.2: must be in (0, 1]`},
		{"negative exact_max_bytes", func(c *Config) { c.Cache.ExactMaxBytes = -1 },
			`config: cache.exact_max_bytes = -1: must be >= 0 (0 disables the exact tier)`},
		{"unknown partition item", func(c *Config) { c.Cache.PartitionBy = []string{"authorization", "cookie"} },
			`config: cache.partition_by[1] = "cookie": must be "authorization", "namespace" or "header:<Name>" ([] shares one cache between all clients)`},
		{"partition header without name", func(c *Config) { c.Cache.PartitionBy = []string{"header:"} },
			`config: cache.partition_by[0] = "header:": "header:" must be followed by a header name such as X-Tenant-ID`},
		{"partition header with space", func(c *Config) { c.Cache.PartitionBy = []string{"header:X Tenant"} },
			`config: cache.partition_by[0] = "header:X Tenant": "header:" must be followed by a header name…`},
		{"partition item twice", func(c *Config) { c.Cache.PartitionBy = []string{"header:X-Tenant", "header:x-tenant"} },
			`config: cache.partition_by[1] = "header:x-tenant": listed twice`},
		{"partition keyword capitalised", func(c *Config) { c.Cache.PartitionBy = []string{"Authorization"} },
			`config: cache.partition_by[0] = "Authorization": must be "authorization", …`},
		{"partition secret value", func(c *Config) { c.Cache.PartitionSecretEnv = "hunter2!" },
			`config: cache.partition_secret_env is not an environment variable name: …`},
		{"cross_user unknown", func(c *Config) { c.Cache.Semantic.CrossUser = "sometimes" },
			`config: cache.semantic.cross_user = "sometimes": must be "agreed", "any" or "never"`},
		{"end_user_header not a header name", func(c *Config) { c.Cache.EndUserHeader = "X End User" },
			`config: cache.end_user_header = "X End User": must be a header name such as X-End-User-ID ("" reads the identity from the body only)`},
		{"max_temperature above 2", func(c *Config) { c.Cache.MaxTemperature = 2.5 },
			`config: cache.max_temperature = 2.5: must be in [0, 2] (requests above it bypass the cache)`},
		{"max_temperature negative", func(c *Config) { c.Cache.MaxTemperature = -1 },
			`config: cache.max_temperature = -1: must be in [0, 2]…`},
		{"stale_threshold above threshold", func(c *Config) { c.Cache.StaleThreshold = 0.95 },
			`config: cache.stale_threshold = 0.95: must be <= cache.threshold (0.92): a stale answer is a fallback, not a stricter match`},
		{"empty data_dir", func(c *Config) { c.Cache.DataDir = "" },
			`config: cache.data_dir is empty: set a writable directory…`},

		// [vector]
		{"unknown backend", func(c *Config) { c.Vector.Backend = "pgvector" },
			`config: vector.backend = "pgvector": must be "embedded" or "qdrant"`},
		{"embedded without path", func(c *Config) { c.Vector.Path = "" },
			`config: vector.path is empty: set the embedded index's directory (default: <cache.data_dir>/vectors)`},
		{"qdrant url with scheme", func(c *Config) {
			c.Vector.Backend = BackendQdrant
			c.Vector.Qdrant.Addr = "http://qdrant:6334"
		}, `config: vector.qdrant.url = "http://qdrant:6334": must be Qdrant's gRPC address as host:port…`},
		{"qdrant without url", func(c *Config) {
			c.Vector.Backend = BackendQdrant
			c.Vector.Qdrant.Addr = ""
		}, `config: vector.qdrant.url is empty: must be Qdrant's gRPC address as host:port…`},
		{"qdrant without collection", func(c *Config) {
			c.Vector.Backend = BackendQdrant
			c.Vector.Qdrant.Collection = ""
		}, `config: vector.qdrant.collection is empty: set the collection name, e.g. "breakwater"`},

		// [embed]
		{"unknown provider", func(c *Config) { c.Embed.Provider = "cohere" },
			`config: embed.provider = "cohere": must be "builtin" or "openai"`},
		{"negative cache_bytes", func(c *Config) { c.Embed.CacheBytes = -MiB },
			`config: embed.cache_bytes = -1048576: must be >= 0 (0 disables the embedding cache)`},
		{"openai without base_url", func(c *Config) {
			c.Embed.Provider = ProviderOpenAI
			c.Embed.OpenAI.Model = "text-embedding-3-small"
		}, `config: embed.openai.base_url is empty: required when embed.provider = "openai": the API root, e.g. https://api.openai.com/v1`},
		{"openai without model", func(c *Config) {
			c.Embed.Provider = ProviderOpenAI
			c.Embed.OpenAI.BaseURL = "http://localhost:11434/v1"
		}, `config: embed.openai.model is empty: required when embed.provider = "openai", e.g. "text-embedding-3-small"`},
		{"openai base_url without scheme", func(c *Config) {
			c.Embed.Provider = ProviderOpenAI
			c.Embed.OpenAI.BaseURL = "api.openai.com/v1"
			c.Embed.OpenAI.Model = "text-embedding-3-small"
		}, `config: embed.openai.base_url = "api.openai.com/v1": must be an http(s) URL of the API root, e.g. https://api.openai.com/v1`},
		{"negative dimensions", func(c *Config) { c.Embed.OpenAI.Dimensions = -1 },
			`config: embed.openai.dimensions = -1: must be >= 0 (0: the model's native size)`},

		// [retry]
		{"max_delay below base_delay", func(c *Config) { c.Retry.MaxDelay = 100 * time.Millisecond },
			`config: retry.max_delay = 100ms: must be >= retry.base_delay (200ms)`},
		{"retry 401", func(c *Config) { c.Retry.RetryOn = []int{429, 401} },
			`config: retry.retry_on[1] = 401: is never retried: 400, 401, 403, 404, 409, 413 and 422 would fail the same way again`},
		{"retry 422", func(c *Config) { c.Retry.RetryOn = []int{422} },
			`config: retry.retry_on[0] = 422: is never retried…`},
		{"retry 302", func(c *Config) { c.Retry.RetryOn = []int{302} },
			`config: retry.retry_on[0] = 302: must be a 4xx or 5xx status`},
		{"retry 600", func(c *Config) { c.Retry.RetryOn = []int{503, 600} },
			`config: retry.retry_on[1] = 600: must be a 4xx or 5xx status`},
		{"retry code twice", func(c *Config) { c.Retry.RetryOn = []int{503, 503} },
			`config: retry.retry_on[1] = 503: listed twice`},

		// [breaker], [stream]
		{"failure_ratio above 1", func(c *Config) { c.Breaker.FailureRatio = 1.5 },
			`config: breaker.failure_ratio = 1.5: must be in (0, 1]`},

		// [[upstreams]]
		{"no upstreams", func(c *Config) {
			c.Upstreams = nil
			c.Models = nil
			c.DefaultUpstream = "openai"
		}, `config: no [[upstreams]]: declare at least one…`},
		{"upstream without base_url", func(c *Config) { c.Upstreams[1].BaseURL = "" },
			`config: upstreams[1].base_url is empty: set the upstream's API root, e.g. https://api.openai.com/v1`},
		{"upstream base_url without scheme", func(c *Config) { c.Upstreams[1].BaseURL = "localhost:8000/v1" },
			`config: upstreams[1].base_url = "localhost:8000/v1": must be an http(s) URL of the API root…`},
		{"upstream base_url ftp", func(c *Config) { c.Upstreams[0].BaseURL = "ftp://api.openai.com/v1" },
			`config: upstreams[0].base_url = "ftp://api.openai.com/v1": must be an http(s) URL…`},
		{"upstream base_url with query", func(c *Config) { c.Upstreams[0].BaseURL = "https://x.openai.azure.com/v1?api-version=1" },
			`config: upstreams[0].base_url = "https://x.openai.azure.com/v1?api-version=1": must not have a query or fragment`},
		{"upstream without name", func(c *Config) {
			c.Upstreams[1].Name = ""
			c.Models[0].Targets = c.Models[0].Targets[:1]
		}, `config: upstreams[1].name is empty: name the upstream, e.g. "openai"`},
		{"upstream name with space", func(c *Config) {
			c.Upstreams[1].Name = "my local"
			c.Models[0].Targets = c.Models[0].Targets[:1]
		}, `config: upstreams[1].name = "my local": must be letters, digits, '.', '_' or '-'`},
		{"duplicate upstream", func(c *Config) {
			c.Upstreams[1].Name = "openai"
			c.Models[0].Targets[1].Upstream = "openai"
		}, `config: upstreams[1].name = "openai": another [[upstreams]] has this name`},
		{"api key pasted into api_key_env", func(c *Config) { c.Upstreams[0].APIKeyEnv = "sk-proj-abc123" },
			`config: upstreams[0].api_key_env is not an environment variable name: it must name the variable that holds the secret (letters, digits, '_'), not the secret itself`},
		{"pool class with space", func(c *Config) { c.Upstreams[0].Pools = map[string]Pool{"real time": {MaxConcurrency: 1}} },
			`config: upstreams[0].pools = "real time": a class must be letters, digits…`},

		// [[models]]
		{"model routed to unknown upstream", func(c *Config) { c.Models[0].Targets[1].Upstream = "azure" },
			`config: models[0].targets[1].upstream = "azure": no [[upstreams]] named "azure" (have: openai, local)`},
		{"target without upstream", func(c *Config) { c.Models[0].Targets[0].Upstream = "" },
			`config: models[0].targets[0].upstream is empty: name one of the [[upstreams]] (have: openai, local)`},
		{"duplicate model", func(c *Config) { c.Models = append(c.Models, c.Models[0]) },
			`config: models[1].name = "gpt-4o-mini": another [[models]] has this name`},
		{"model without name", func(c *Config) { c.Models[0].Name = "" },
			`config: models[0].name is empty: set the model name clients request, e.g. "gpt-4o-mini"`},
		{"model without targets", func(c *Config) { c.Models[0].Targets = nil },
			`config: models[0].targets is empty: add at least one {upstream = ..., model = ...}`},
		{"target priority negative", func(c *Config) { c.Models[0].Targets[1].Priority = -1 },
			`config: models[0].targets[1].priority = -1: must be >= 0 (lower is tried first)`},

		// [fleet], [[budgets]]: fleet.StoreOptions.Validate, fleet.ValidateBudgets
		{"redis_url http", func(c *Config) { c.Fleet.RedisURL = "http://redis:6379" },
			`config: fleet.redis_url = "http://redis:6379": must be a redis:// or rediss:// URL, e.g. "redis://redis:6379/0"`},
		{"redis_prefix empty", func(c *Config) { c.Fleet.Prefix = "" },
			`config: fleet.redis_prefix is empty: must not be empty`},
		{"budget without a limit", func(c *Config) { c.Budgets = []fleet.Budget{{Name: "team"}} },
			`config: budgets[0] = "team": set requests_per_minute, tokens_per_minute or tokens_per_day`},

		// default_upstream
		{"default_upstream unknown", func(c *Config) { c.DefaultUpstream = "anthropic" },
			`config: default_upstream = "anthropic": no [[upstreams]] named "anthropic" (have: openai, local)`},
		{"default_upstream empty", func(c *Config) { c.DefaultUpstream = "" },
			`config: default_upstream is empty: set it to the upstream that serves unrouted models (have: openai, local)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(c)
			errs := joined(t, c.Validate())
			if got, want := len(errs), 1; got != want {
				t.Fatalf("Validate() returned %d problems, want %d:\n%v", got, want, errors.Join(errs...))
			}
			got := errs[0].Error()
			if strings.Contains(got, "\n") {
				t.Errorf("message spans lines: %q", got)
			}
			if prefix, ok := strings.CutSuffix(tt.want, "…"); ok {
				if !strings.HasPrefix(got, prefix) {
					t.Errorf("Validate() = %q\nwant prefix %q", got, prefix)
				}
			} else if got != tt.want {
				t.Errorf("Validate() = %q\nwant        %q", got, tt.want)
			}
		})
	}
}

// TestFileZeroAndNegative: a key written as 0 reaches its option as the
// option's negative value, which the option's rule judges (shown as the 0
// written), and a negative value written where 0 means "none" is refused.
func TestFileZeroAndNegative(t *testing.T) {
	const upstreams = "[[upstreams]]\nname = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\n"
	tests := []struct{ name, file, want string }{
		{"max_attempts zero", "[retry]\nmax_attempts = 0\n" + upstreams,
			`config: retry.max_attempts = 0: must be >= 1 (1: no retry)`},
		{"negative base_delay", "[retry]\nbase_delay = \"-1ms\"\n" + upstreams,
			`config: retry.base_delay = -1ms: must be >= 0 (0: retry at once)`},
		{"deadline zero", "[retry]\ndeadline = \"0s\"\n" + upstreams,
			`config: retry.deadline = 0s: must be > 0`},
		{"window zero", "[breaker]\nwindow = \"0s\"\n" + upstreams,
			`config: breaker.window = 0s: must be > 0`},
		{"min_requests zero", "[breaker]\nmin_requests = 0\n" + upstreams,
			`config: breaker.min_requests = 0: must be >= 1`},
		{"failure_ratio zero", "[breaker]\nfailure_ratio = 0.0\n" + upstreams,
			`config: breaker.failure_ratio = 0: must be in (0, 1]`},
		{"consecutive_failures negative", "[breaker]\nconsecutive_failures = -1\n" + upstreams,
			`config: breaker.consecutive_failures = -1: must be >= 0 (0 disables this trigger)`},
		{"open_for zero", "[breaker]\nopen_for = \"0s\"\n" + upstreams,
			`config: breaker.open_for = 0s: must be > 0`},
		{"half_open_probes zero", "[breaker]\nhalf_open_probes = 0\n" + upstreams,
			`config: breaker.half_open_probes = 0: must be >= 1`},
		{"upstream timeout zero", upstreams + "timeout = \"0s\"\n",
			`config: upstreams[0].timeout = 0s: must be > 0`},
		{"upstream max_concurrency zero", upstreams + "max_concurrency = 0\n",
			`config: upstreams[0].max_concurrency = 0: must be >= 1`},
		{"upstream max_queue negative", upstreams + "max_queue = -1\n",
			`config: upstreams[0].max_queue = -1: must be >= 0 (0: no waiting)`},
		{"pool max_concurrency zero", upstreams + "[upstreams.pools.realtime]\nmax_concurrency = 0\n",
			`config: upstreams[0].pools.realtime.max_concurrency = 0: must be >= 1`},
		{"pool max_queue negative", upstreams + "[upstreams.pools.realtime]\nmax_queue = -2\n",
			`config: upstreams[0].pools.realtime.max_queue = -2: must be >= 0 (0: no waiting)`},
		{"target weight zero", upstreams + "[[models]]\nname = \"m\"\ntargets = [{ upstream = \"openai\", weight = 0.0 }]\n",
			`config: models[0].targets[0].weight = 0: must be > 0`},
		{"max_entries zero", "[vector]\nmax_entries = 0\n" + upstreams,
			`config: vector.max_entries = 0: must be > 0`},
		{"max_bytes zero", "[vector]\nmax_bytes = \"0MiB\"\n" + upstreams,
			`config: vector.max_bytes = 0: must be > 0`},
		{"qdrant timeout zero", "[vector.qdrant]\ntimeout = \"0s\"\n" + upstreams,
			`config: vector.qdrant.timeout = 0s: must be > 0`},
		{"embedder timeout zero", "[embed.openai]\ntimeout = \"0s\"\n" + upstreams,
			`config: embed.openai.timeout = 0s: must be > 0`},
		{"judge candidates zero", "[cache.verify]\ncandidates = 0\n" + upstreams,
			`config: cache.verify.candidates = 0: must be >= 1`},
		{"judge min_similarity zero", "[cache.verify]\nmin_similarity = 0.0\n" + upstreams,
			`config: cache.verify.min_similarity = 0: must be in (0, 1]`},
		{"negative max_body_bytes", "[server]\nmax_body_bytes = -5\n" + upstreams,
			`config: server.max_body_bytes = -5: must be >= 0 (0: no limit)`},
		{"threshold zero", "[cache]\nthreshold = 0.0\n" + upstreams,
			`config: cache.threshold = 0: must be in (0, 1]`},
		{"zero ttl", "[cache]\nttl = \"0s\"\n" + upstreams,
			`config: cache.ttl = 0s: must be > 0`},
		{"stale_threshold zero", "[cache]\nstale_threshold = 0.0\n" + upstreams,
			`config: cache.stale_threshold = 0: must be in (0, 1]`},
		{"write_queue zero", "[cache]\nwrite_queue = 0\n" + upstreams,
			`config: cache.write_queue = 0: must be >= 1`},
		{"retry_after_cap zero", "[retry]\nretry_after_cap = \"0s\"\n" + upstreams,
			`config: retry.retry_after_cap = 0s: must be >= 1s`},
		{"redis_timeout zero", "[fleet]\nredis_timeout = \"0s\"\n" + upstreams,
			`config: fleet.redis_timeout = 0s: must be > 0`},
		{"budget limit negative", upstreams + "[[budgets]]\nname = \"b\"\ntokens_per_minute = -1\n",
			`config: budgets[0] = "b": limits must be >= 0 (0: no limit)`},
		{"max_answer_bytes negative", "[server]\nmax_answer_bytes = -1\n" + upstreams,
			`config: server.max_answer_bytes = -1: must be >= 0 (0: no limit)`},
		{"max_duration negative", "[stream]\nmax_duration = \"-1m\"\n" + upstreams,
			`config: stream.max_duration = -1m0s: must be >= 0 (0: retry.deadline alone)`},
		{"idle_timeout negative", "[stream]\nidle_timeout = \"-1s\"\n" + upstreams,
			`config: stream.idle_timeout = -1s: must be >= 0 (0 disables it)`},
		{"environment zero", upstreams,
			`config: BREAKWATER_RETRY_MAX_ATTEMPTS (retry.max_attempts) = 0: must be >= 1 (1: no retry)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			if tt.name == "environment zero" {
				env["BREAKWATER_RETRY_MAX_ATTEMPTS"] = "0"
			}
			_, err := Load(writeFile(t, tt.file), envOf(env))
			if err == nil {
				t.Fatalf("Load() = nil, want %q", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Load() = %q\nwant     %q", got, tt.want)
			}
		})
	}
}

func TestValidateNeverEchoesSecrets(t *testing.T) {
	c := validConfig()
	c.Upstreams[0].APIKeyEnv = "sk-proj-abc123"
	c.Embed.OpenAI.APIKeyEnv = "sk-other-secret"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want an error")
	}
	for _, secret := range []string{"sk-proj-abc123", "sk-other-secret"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q echoes the value %q of an *_env key", err, secret)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := validConfig()
	c.Cache.Threshold = 1.5
	c.Vector.Backend = "pgvector"
	c.Models[0].Targets[1].Upstream = "azure"
	errs := joined(t, c.Validate())
	want := []string{
		`config: cache.threshold = 1.5: must be in (0, 1]`,
		`config: vector.backend = "pgvector": must be "embedded" or "qdrant"`,
		`config: models[0].targets[1].upstream = "azure": no [[upstreams]] named "azure" (have: openai, local)`,
	}
	if got := len(errs); got != len(want) {
		t.Fatalf("Validate() returned %d problems, want %d: %v", got, len(want), errors.Join(errs...))
	}
	for i := range want {
		if got := errs[i].Error(); got != want[i] {
			t.Errorf("problem %d = %q, want %q", i, got, want[i])
		}
	}

	var first *Error
	if !errors.As(c.Validate(), &first) {
		t.Fatal("errors.As(err, *Error) = false")
	}
	if got, want := first.Key, "cache.threshold"; got != want {
		t.Errorf("first problem key = %q, want %q", got, want)
	}
	if got, want := first.Value, any(float32(1.5)); got != want {
		t.Errorf("first problem value = %v, want %v", got, want)
	}
}

func TestValidateAcceptsEdges(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"shared cache", func(c *Config) { c.Cache.PartitionBy = []string{} }},
		{"header partition", func(c *Config) { c.Cache.PartitionBy = []string{"header:X-Tenant-ID", "namespace"} }},
		{"threshold 1 and stale equal", func(c *Config) { c.Cache.Threshold, c.Cache.StaleThreshold = 1, 1 }},
		{"stale equal to a threshold float32 rounds down", func(c *Config) { c.Cache.Threshold, c.Cache.StaleThreshold = 0.9, 0.9 }},
		{"no retry statuses", func(c *Config) { c.Retry.RetryOn = nil }},
		{"retry 408 and 529", func(c *Config) { c.Retry.RetryOn = []int{408, 529} }},
		{"max_delay equals base_delay", func(c *Config) { c.Retry.MaxDelay = c.Retry.BaseDelay }},
		{"zero sizes", func(c *Config) { c.Server.MaxBodyBytes, c.Cache.ExactMaxBytes, c.Embed.CacheBytes = 0, 0, 0 }},
		{"listen all interfaces", func(c *Config) { c.Server.Listen = ":8080" }},
		{"listen ipv6", func(c *Config) { c.Server.Listen = "[::1]:8080" }},
		{"no queue", func(c *Config) { c.Upstreams[0].MaxQueue = 0 }},
		{"idle timeout disabled", func(c *Config) { c.Stream.IdleTimeout = 0 }},
		{"consecutive failures disabled", func(c *Config) { c.Breaker.ConsecutiveFailures = 0 }},
		{"max_temperature bounds", func(c *Config) { c.Cache.MaxTemperature = 2 }},
		{"qdrant", func(c *Config) { c.Vector.Backend = BackendQdrant }},
		{"qdrant ignores empty path", func(c *Config) { c.Vector.Backend, c.Vector.Path = BackendQdrant, "" }},
		{"openai embedder", func(c *Config) {
			c.Embed.Provider = ProviderOpenAI
			c.Embed.OpenAI.BaseURL = "http://localhost:11434/v1"
			c.Embed.OpenAI.Model = "nomic-embed-text"
		}},
		{"no models", func(c *Config) { c.Models = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}
