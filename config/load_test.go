package config

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// envOf returns an env lookup backed by m (nothing else is set).
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeFile writes a config file into a temp dir and returns its path.
func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "breakwater.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, path string, env map[string]string) *Config {
	t.Helper()
	c, err := Load(path, envOf(env))
	if err != nil {
		t.Fatalf("Load(%q) = %v", path, err)
	}
	return c
}

func TestLoadNoFile(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		c := mustLoad(t, "", nil)
		if !reflect.DeepEqual(c, Default()) {
			t.Errorf("Load(\"\") = %+v\nwant Default() = %+v", c, Default())
		}
		if got, want := len(c.Upstreams), 1; got != want {
			t.Fatalf("len(Upstreams) = %d, want %d", got, want)
		}
		u := c.Upstreams[0]
		if got, want := u.Name, "default"; got != want {
			t.Errorf("upstream name = %q, want %q", got, want)
		}
		if got, want := u.BaseURL, "https://api.openai.com/v1"; got != want {
			t.Errorf("upstream base_url = %q, want %q", got, want)
		}
		if got, want := u.APIKeyEnv, ""; got != want {
			t.Errorf("upstream api_key_env = %q, want %q (forward the client's Authorization)", got, want)
		}
		if got, want := c.DefaultUpstream, "default"; got != want {
			t.Errorf("default_upstream = %q, want %q", got, want)
		}
	})
	t.Run("upstream from env", func(t *testing.T) {
		c := mustLoad(t, "", map[string]string{UpstreamURLEnv: "http://localhost:11434/v1/"})
		if got, want := c.Upstreams[0].BaseURL, "http://localhost:11434/v1"; got != want {
			t.Errorf("base_url = %q, want %q (trailing slash trimmed)", got, want)
		}
	})
	t.Run("bad upstream from env", func(t *testing.T) {
		_, err := Load("", envOf(map[string]string{UpstreamURLEnv: "localhost:11434"}))
		if err == nil || !strings.Contains(err.Error(), `config: BREAKWATER_UPSTREAM_URL (upstreams[0].base_url) = "localhost:11434": must be an http(s) URL`) {
			t.Errorf("Load() = %v, want the problem named after BREAKWATER_UPSTREAM_URL", err)
		}
	})
	t.Run("section overrides apply", func(t *testing.T) {
		c := mustLoad(t, "", map[string]string{"BREAKWATER_CACHE_THRESHOLD": "0.97"})
		if got, want := c.Cache.Threshold, float32(0.97); got != want {
			t.Errorf("cache.threshold = %v, want %v", got, want)
		}
	})
}

func TestDefaults(t *testing.T) {
	c := Default()
	tests := []struct {
		key       string
		got, want any
	}{
		{"server.listen", c.Server.Listen, "127.0.0.1:8080"},
		{"server.max_body_bytes", c.Server.MaxBodyBytes, int64(4 * MiB)},
		{"server.admin_token_env", c.Server.AdminTokenEnv, "BREAKWATER_ADMIN_TOKEN"},
		{"server.shutdown_timeout", c.Server.ShutdownTimeout.D(), 15 * time.Second},
		{"server.read_header_timeout", c.Server.ReadHeaderTimeout, 10 * time.Second},
		{"server.log_level", c.Server.LogLevel, "info"},
		{"server.log_format", c.Server.LogFormat, "json"},
		{"cache.enabled", c.Cache.Enabled, true},
		{"cache.ttl", c.Cache.TTL, 24 * time.Hour},
		{"cache.threshold", c.Cache.Threshold, float32(0.92)},
		{"cache.exact_max_bytes", c.Cache.ExactMaxBytes, 64 * MiB},
		{"cache.partition_by", c.Cache.PartitionBy, []string{"authorization", "namespace"}},
		{"cache.partition_secret_env", c.Cache.PartitionSecretEnv, "BREAKWATER_PARTITION_SECRET"},
		{"cache.max_temperature", c.Cache.MaxTemperature, 1.0},
		{"cache.stale_if_error", c.Cache.StaleIfError, true},
		{"cache.stale_threshold", c.Cache.StaleThreshold, float32(0.85)},
		{"cache.write_queue", c.Cache.QueueSize, 1024},
		{"cache.data_dir", c.Cache.DataDir, "./data"},
		{"vector.backend", c.Vector.Backend, "embedded"},
		{"vector.path", c.Vector.Path, filepath.Join("data", "vectors")},
		{"vector.max_entries", c.Vector.MaxEntries, 100000},
		{"vector.qdrant.url", c.Vector.Qdrant.Addr, "localhost:6334"},
		{"vector.qdrant.collection", c.Vector.Qdrant.Collection, "breakwater"},
		{"vector.qdrant.api_key_env", c.Vector.Qdrant.APIKeyEnv, ""},
		{"vector.qdrant.tls", c.Vector.Qdrant.TLS, false},
		{"vector.qdrant.timeout", c.Vector.Qdrant.Timeout, 2 * time.Second},
		{"embed.provider", c.Embed.Provider, "builtin"},
		{"embed.cache_bytes", c.Embed.CacheBytes, 32 * MiB},
		{"embed.openai.timeout", c.Embed.OpenAI.Timeout, 10 * time.Second},
		{"retry.max_attempts", c.Retry.MaxAttempts, 3},
		{"retry.base_delay", c.Retry.BaseDelay, 200 * time.Millisecond},
		{"retry.max_delay", c.Retry.MaxDelay, 5 * time.Second},
		{"retry.deadline", c.Retry.Deadline, 60 * time.Second},
		{"retry.retry_on", c.Retry.RetryOn, []int{429, 500, 502, 503, 504, 529}},
		{"breaker.window", c.Breaker.Window, 30 * time.Second},
		{"breaker.min_requests", c.Breaker.MinRequests, 20},
		{"breaker.failure_ratio", c.Breaker.FailureRatio, 0.5},
		{"breaker.consecutive_failures", c.Breaker.ConsecutiveFailures, 5},
		{"breaker.open_for", c.Breaker.OpenFor, 15 * time.Second},
		{"breaker.half_open_probes", c.Breaker.HalfOpenProbes, 1},
		{"stream.resume", c.Stream.Resume, true},
		{"stream.idle_timeout", c.Stream.IdleTimeout, 30 * time.Second},
		{"default_upstream", c.DefaultUpstream, "default"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("%s = %v, want %v", tt.key, tt.got, tt.want)
			}
		})
	}
}

func TestLoadFillsDefaults(t *testing.T) {
	c := mustLoad(t, writeFile(t, `
[cache]
threshold = 0.95

[[upstreams]]
name = "openai"
base_url = "https://api.openai.com/v1"
max_queue = 0

[upstreams.pools.realtime]
max_concurrency = 4

[upstreams.pools.batch]

[[models]]
name = "gpt-4o"
targets = [{ upstream = "openai" }, { upstream = "openai", model = "gpt-4o-mini", priority = 1, weight = 0.5 }]
`), nil)

	want := Default()
	want.Cache.Threshold = 0.95
	u := Upstream{Upstream: upstream.UpstreamDefaults()}
	u.Name, u.BaseURL = "openai", "https://api.openai.com/v1"
	u.MaxQueue = -1 // max_queue = 0: no waiting (not the default)
	u.Pools = map[string]Pool{
		"realtime": {MaxConcurrency: 4, MaxQueue: -1}, // queue inherited
		"batch":    {MaxConcurrency: upstream.DefaultMaxConcurrency, MaxQueue: -1},
	}
	want.Upstreams = []Upstream{u}
	want.Models = []Model{{
		Route: upstream.Route{
			Name: "gpt-4o",
			Targets: []Target{
				{Upstream: "openai", Model: "gpt-4o", Priority: 0, Weight: 1},
				{Upstream: "openai", Model: "gpt-4o-mini", Priority: 1, Weight: 0.5},
			},
		},
		CacheGroup: "gpt-4o",
	}}
	want.DefaultUpstream = "openai" // the only upstream
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load() =\n%+v\nwant\n%+v", c, want)
	}
}

func TestLoadExplicitFalseAndEmpty(t *testing.T) {
	c := mustLoad(t, writeFile(t, `
[cache]
enabled = false
stale_if_error = false
partition_by = []

[retry]
retry_on = []

[stream]
resume = false
idle_timeout = "0s"
max_duration = "0s"

[server]
max_answer_bytes = 0
`), nil)
	if c.Cache.Enabled || c.Cache.StaleIfError || c.Stream.Resume {
		t.Errorf("enabled, stale_if_error, resume = %v, %v, %v; want all false", c.Cache.Enabled, c.Cache.StaleIfError, c.Stream.Resume)
	}
	if got, want := c.Cache.PartitionBy, []string{}; got == nil || len(got) != 0 {
		t.Errorf("partition_by = %#v, want %#v (explicitly shared, not the default)", got, want)
	}
	if got := c.Retry.RetryOn; len(got) != 0 {
		t.Errorf("retry_on = %v, want empty", got)
	}
	if got, want := c.Stream.IdleTimeout, time.Duration(-1); got != want {
		t.Errorf("idle_timeout = %v, want %v", got, want)
	}
	// The caller's bounds, embedded in [stream] and [server]: 0 is none.
	if got, want := c.Stream.MaxStreamDuration, time.Duration(-1); got != want {
		t.Errorf("max_duration = %v, want %v", got, want)
	}
	if got, want := c.Server.MaxAnswerBytes, int64(-1); got != want {
		t.Errorf("max_answer_bytes = %v, want %v", got, want)
	}
}

func TestLoadTestdata(t *testing.T) {
	t.Run("good", func(t *testing.T) {
		files, err := filepath.Glob("testdata/good/*.toml")
		if err != nil || len(files) == 0 {
			t.Fatalf("no testdata/good files: %v", err)
		}
		for _, f := range files {
			t.Run(filepath.Base(f), func(t *testing.T) {
				c := mustLoad(t, f, map[string]string{UpstreamURLEnv: "http://localhost:8000/v1"})
				if len(c.Upstreams) == 0 || c.DefaultUpstream == "" {
					t.Errorf("upstreams = %v, default_upstream = %q: want at least one and a default", c.Upstreams, c.DefaultUpstream)
				}
			})
		}
	})
	t.Run("bad", func(t *testing.T) {
		files, err := filepath.Glob("testdata/bad/*.toml")
		if err != nil || len(files) == 0 {
			t.Fatalf("no testdata/bad files: %v", err)
		}
		for _, f := range files {
			t.Run(filepath.Base(f), func(t *testing.T) {
				want := strings.ReplaceAll(wantLine(t, f), "FILE", f)
				_, err := Load(f, envOf(nil))
				if err == nil {
					t.Fatalf("Load() = nil error, want %q", want)
				}
				if got := err.Error(); got != want {
					t.Errorf("Load() =\n%s\nwant\n%s", got, want)
				}
			})
		}
	})
}

// wantLine reads the "# want: …" first line of a testdata/bad file.
func wantLine(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		t.Fatalf("%s is empty", path)
	}
	want, ok := strings.CutPrefix(s.Text(), "# want: ")
	if !ok {
		t.Fatalf("%s: first line must be \"# want: <error>\"", path)
	}
	return want
}

func TestLoadGoodSharedCache(t *testing.T) {
	c := mustLoad(t, "testdata/good/shared-cache.toml", nil)
	if got := c.Cache.PartitionBy; got == nil || len(got) != 0 {
		t.Errorf("partition_by = %#v, want an empty, non-nil list", got)
	}
	if got, want := c.Models[0].Targets[1], (Target{Upstream: "ollama", Model: "llama3.1", Priority: 1, Weight: 2}); got != want {
		t.Errorf("targets[1] = %+v, want %+v", got, want)
	}
	if got, want := c.Upstreams[0].Pools["batch"], (Pool{MaxConcurrency: 2, MaxQueue: -1}); got != want {
		t.Errorf("pools.batch = %+v, want %+v", got, want)
	}
	if got, want := c.Upstreams[1].MaxQueue, upstream.DefaultMaxQueue; got != want {
		t.Errorf("upstreams[1].max_queue = %d, want %d", got, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"), envOf(nil))
	if err == nil || !strings.HasPrefix(err.Error(), "config: read file: ") {
		t.Errorf("Load(missing) = %v, want a read error", err)
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"typo in section", "[server]\nlisten = \":1\"\nlistn = \":2\"\n",
			`:3:1: unknown key "server.listn" (did you mean "listen"?)`},
		{"nested section", "[vector.qdrant]\nurl = \"q:6334\"\ncolection = \"x\"\n",
			`:3:1: unknown key "vector.qdrant.colection" (did you mean "collection"?)`},
		{"unknown section", "[proxy]\nport = 1\n",
			`:1:2: unknown key "proxy" (allowed: server, cache, vector, embed, retry, breaker, stream, upstreams, models, default_upstream, api_upstreams, prices, tracing, fleet, budgets)`},
		{"upstream key", "[[upstreams]]\nname = \"a\"\nbase_url = \"http://a/v1\"\napi_key = \"sk-x\"\n",
			`:4:1: unknown key "upstreams.api_key" (allowed: name, base_url, auth, timeout, max_concurrency, max_queue, pools, api_key_env)`},
		{"pool key", "[[upstreams]]\nname = \"a\"\nbase_url = \"http://a/v1\"\n[upstreams.pools.batch]\nqueue = 1\n",
			`:5:1: unknown key "upstreams.pools.batch.queue" (allowed: max_concurrency, max_queue)`},
		{"target key", "[[upstreams]]\nname = \"a\"\nbase_url = \"http://a/v1\"\n[[models]]\nname = \"m\"\ntargets = [{ upstream = \"a\", prio = 1 }]\n",
			`:6:30: unknown key "prio"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.body)
			_, err := Load(path, envOf(nil))
			if err == nil {
				t.Fatal("Load() = nil error, want unknown key")
			}
			if got, want := err.Error(), "config: "+path+tt.want; !strings.HasPrefix(got, want) {
				t.Errorf("Load() =\n%s\nwant prefix\n%s", got, want)
			}
		})
	}
}

func TestUnknownKeysAllReported(t *testing.T) {
	_, err := Load(writeFile(t, "[server]\nlistn = 1\n[cache]\ntreshold = 0.9\n"), envOf(nil))
	if err == nil {
		t.Fatal("Load() = nil error")
	}
	for _, key := range []string{`"server.listn"`, `"cache.treshold"`} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("Load() = %v, want it to name %s", err, key)
		}
	}
}

func TestEnvKeys(t *testing.T) {
	keys := envKeys()
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.Name] {
			t.Errorf("%s is generated twice", k.Name)
		}
		seen[k.Name] = true
		if got, want := k.Name, EnvPrefix+strings.ToUpper(strings.ReplaceAll(k.Key, ".", "_")); got != want {
			t.Errorf("env name for %s = %s, want %s", k.Key, got, want)
		}
	}
	for _, name := range []string{
		"BREAKWATER_SERVER_LISTEN",
		"BREAKWATER_CACHE_THRESHOLD",
		"BREAKWATER_CACHE_PARTITION_BY",
		"BREAKWATER_VECTOR_QDRANT_URL",
		"BREAKWATER_VECTOR_QDRANT_TLS",
		"BREAKWATER_EMBED_OPENAI_BASE_URL",
		"BREAKWATER_RETRY_RETRY_ON",
		"BREAKWATER_BREAKER_HALF_OPEN_PROBES",
		"BREAKWATER_STREAM_IDLE_TIMEOUT",
		"BREAKWATER_DEFAULT_UPSTREAM",
	} {
		if !seen[name] {
			t.Errorf("no override %s", name)
		}
	}
	// Variables with another meaning must not double as overrides.
	d := Default()
	for _, name := range []string{UpstreamURLEnv, d.Server.AdminTokenEnv, d.Cache.PartitionSecretEnv} {
		if seen[name] {
			t.Errorf("%s is both an override and a variable with its own meaning", name)
		}
	}
	for _, name := range []string{"BREAKWATER_UPSTREAMS_NAME", "BREAKWATER_MODELS_NAME", "BREAKWATER_UPSTREAMS_POOLS"} {
		if seen[name] {
			t.Errorf("%s: arrays of tables and maps must have no override", name)
		}
	}
	// Every section key has one: count the scalar fields by hand-free reflection.
	if got, want := len(keys), countLeaves(reflect.TypeFor[Config]()); got != want {
		t.Errorf("len(envKeys()) = %d, want %d", got, want)
	}
}

// countLeaves counts the scalar and list keys of the sections.
func countLeaves(t reflect.Type) int {
	n := 0
	for f := range t.Fields() {
		tag := f.Tag.Get("toml")
		switch {
		case f.Anonymous && tag == "":
			n += countLeaves(f.Type) // an embedded option type's keys
		case tag == "" || tag == "-":
			// a library option's field that is no key
		case f.Type == durationType || f.Type == sizeType || f.Type == timeDuration:
			n++
		case f.Type.Kind() == reflect.Struct:
			n += countLeaves(f.Type)
		case f.Type.Kind() == reflect.Map, f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
		default:
			n++
		}
	}
	return n
}

// TestEnvOverrideEveryKey sets each override alone and checks it changes its
// key and nothing else.
func TestEnvOverrideEveryKey(t *testing.T) {
	for _, k := range envKeys() {
		t.Run(k.Name, func(t *testing.T) {
			want := defaults()
			field := reflect.ValueOf(want).Elem().FieldByIndex(k.Index)
			var s string
			switch {
			case k.Type == durationType:
				d := Duration(field.Int()) + Duration(1500*time.Millisecond)
				s = d.String()
				field.SetInt(int64(d))
			case k.Type == sizeType:
				n := field.Int() + 1
				s = strconv.FormatInt(n, 10)
				field.SetInt(n)
			case k.Type.Kind() == reflect.String:
				s = "override-" + strings.ToLower(k.Name)
				field.SetString(s)
			case k.Type.Kind() == reflect.Bool:
				s = strconv.FormatBool(!field.Bool())
				field.SetBool(!field.Bool())
			case k.Type.Kind() == reflect.Int:
				s = strconv.FormatInt(field.Int()+7, 10)
				field.SetInt(field.Int() + 7)
			case k.Type.Kind() == reflect.Float64, k.Type.Kind() == reflect.Float32:
				s = "0.42"
				field.SetFloat(0.42)
			case k.Type == reflect.TypeFor[[]string]():
				s = " a , b,,"
				field.Set(reflect.ValueOf([]string{"a", "b"}))
			case k.Type == reflect.TypeFor[[]int]():
				s = "429, 503"
				field.Set(reflect.ValueOf([]int{429, 503}))
			default:
				t.Fatalf("no sample value for %s of type %s", k.Key, k.Type)
			}
			got := defaults()
			if err := applyEnv(got, envOf(map[string]string{k.Name: s}), &loaded{env: map[string]string{}}); err != nil {
				t.Fatalf("applyEnv(%s=%q) = %v", k.Name, s, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s=%q: %s = %v, want %v (or another key changed)", k.Name, s, k.Key,
					reflect.ValueOf(got).Elem().FieldByIndex(k.Index), field)
			}
		})
	}
}

func TestEnvOverridesLoad(t *testing.T) {
	path := writeFile(t, `
default_upstream = "openai"

[cache]
threshold = 0.9
data_dir = "/srv/a"

[vector]
backend = "qdrant"

[[upstreams]]
name = "openai"
base_url = "https://api.openai.com/v1"

[[upstreams]]
name = "local"
base_url = "http://localhost:8000/v1"
`)
	c := mustLoad(t, path, map[string]string{
		"BREAKWATER_CACHE_THRESHOLD":       "0.95",
		"BREAKWATER_CACHE_PARTITION_BY":    "[]",
		"BREAKWATER_CACHE_DATA_DIR":        "/var/lib/breakwater",
		"BREAKWATER_VECTOR_QDRANT_URL":     "qdrant.internal:6334",
		"BREAKWATER_VECTOR_QDRANT_TLS":     "true",
		"BREAKWATER_SERVER_LISTEN":         "0.0.0.0:9090",
		"BREAKWATER_SERVER_MAX_BODY_BYTES": "8MiB",
		"BREAKWATER_RETRY_RETRY_ON":        "429,503",
		"BREAKWATER_RETRY_BASE_DELAY":      "50ms",
		"BREAKWATER_DEFAULT_UPSTREAM":      "local",
		UpstreamURLEnv:                     "http://ignored/v1", // the file declares upstreams
	})
	tests := []struct {
		key       string
		got, want any
	}{
		{"cache.threshold", c.Cache.Threshold, float32(0.95)},
		{"cache.partition_by", c.Cache.PartitionBy, []string{}},
		{"cache.data_dir", c.Cache.DataDir, "/var/lib/breakwater"},
		{"vector.path", c.Vector.Path, filepath.Join("/var/lib/breakwater", "vectors")},
		{"vector.qdrant.url", c.Vector.Qdrant.Addr, "qdrant.internal:6334"},
		{"vector.qdrant.tls", c.Vector.Qdrant.TLS, true},
		{"server.listen", c.Server.Listen, "0.0.0.0:9090"},
		{"server.max_body_bytes", c.Server.MaxBodyBytes, int64(8 * MiB)},
		{"retry.retry_on", c.Retry.RetryOn, []int{429, 503}},
		{"retry.base_delay", c.Retry.BaseDelay, 50 * time.Millisecond},
		{"default_upstream", c.DefaultUpstream, "local"},
		{"upstreams[0].base_url", c.Upstreams[0].BaseURL, "https://api.openai.com/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.key, tt.got, tt.want)
			}
		})
	}
}

func TestEnvOverrideErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"not a number", map[string]string{"BREAKWATER_CACHE_THRESHOLD": "high"},
			`config: BREAKWATER_CACHE_THRESHOLD = "high": cache.threshold must be a number`},
		{"not a bool", map[string]string{"BREAKWATER_VECTOR_QDRANT_TLS": "yes please"},
			`config: BREAKWATER_VECTOR_QDRANT_TLS = "yes please": vector.qdrant.tls must be true or false`},
		{"bare number duration", map[string]string{"BREAKWATER_RETRY_DEADLINE": "60"},
			`config: BREAKWATER_RETRY_DEADLINE = "60": retry.deadline must be a Go duration string such as "200ms", "5s" or "1m30s"`},
		{"bad list item", map[string]string{"BREAKWATER_RETRY_RETRY_ON": "429,5xx"},
			`config: BREAKWATER_RETRY_RETRY_ON = "429,5xx": retry.retry_on must be a list of integers, comma-separated ("[]" for none)`},
		{"int overflow", map[string]string{"BREAKWATER_RETRY_MAX_ATTEMPTS": "99999999999999999999"},
			`config: BREAKWATER_RETRY_MAX_ATTEMPTS = "99999999999999999999": retry.max_attempts must be an integer`},
		{"parses but invalid", map[string]string{"BREAKWATER_CACHE_THRESHOLD": "1.5"},
			`config: BREAKWATER_CACHE_THRESHOLD (cache.threshold) = 1.5: must be in (0, 1]`},
		{"bad enum", map[string]string{"BREAKWATER_VECTOR_BACKEND": "pgvector"},
			`config: BREAKWATER_VECTOR_BACKEND (vector.backend) = "pgvector": must be "embedded" or "qdrant"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("", envOf(tt.env))
			if err == nil {
				t.Fatalf("Load() = nil error, want %q", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Load() = %q\nwant     %q", got, tt.want)
			}
		})
	}
}

func TestEnvOverrideErrorsAllReported(t *testing.T) {
	_, err := Load("", envOf(map[string]string{
		"BREAKWATER_CACHE_THRESHOLD":  "x",
		"BREAKWATER_RETRY_BASE_DELAY": "y",
	}))
	if err == nil {
		t.Fatal("Load() = nil error")
	}
	lines := strings.Split(err.Error(), "\n")
	if got, want := len(lines), 2; got != want {
		t.Fatalf("Load() = %q: %d lines, want %d", err, got, want)
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "BREAKWATER_RETRY_BASE_DELAY") }) {
		t.Errorf("Load() = %q, want BREAKWATER_RETRY_BASE_DELAY named", err)
	}
}

// A shorter list in the file replaces the default list; it does not
// overwrite its first elements.
func TestLoadListReplacesDefault(t *testing.T) {
	c := mustLoad(t, writeFile(t, "[cache]\npartition_by = [\"namespace\"]\n[retry]\nretry_on = [503]\n"), nil)
	if got, want := c.Cache.PartitionBy, []string{"namespace"}; !slices.Equal(got, want) {
		t.Errorf("partition_by = %q, want %q", got, want)
	}
	if got, want := c.Retry.RetryOn, []int{503}; !slices.Equal(got, want) {
		t.Errorf("retry_on = %v, want %v", got, want)
	}
}

func TestUnknownEnv(t *testing.T) {
	c := mustLoad(t, "", map[string]string{UpstreamURLEnv: "http://127.0.0.1:9000/v1"})
	c.Upstreams[0].APIKeyEnv = "BREAKWATER_OPENAI_KEY"
	environ := []string{
		"PATH=/usr/bin",
		UpstreamURLEnv + "=http://127.0.0.1:9000/v1",
		"BREAKWATER_SERVER_LOG_LEVEL=warn",   // a setting
		"BREAKWATER_ADMIN_TOKEN=secret",      // named by server.admin_token_env
		"BREAKWATER_PARTITION_SECRET=s",      // named by cache.partition_secret_env
		"BREAKWATER_OPENAI_KEY=sk-1",         // named by an upstream's api_key_env
		"BREAKWATER_LOG_LEVEL=warn",          // a section left out
		"BREAKWATER_CACHE_THRESHHOLD=0.95",   // misspelt
		"BREAKWATER_SOMETHING_ELSE=1",        // nothing close
		"BREAKWATER_URL=http://x",            // ends several settings: no guess
		"BREAKWATER_CACHE_ENABLED=",          // empty: ignored like an unset one
		"NOT_BREAKWATER_CACHE_ENABLED=false", // another prefix
	}
	got := c.UnknownEnv(environ)
	want := []string{
		"config: environment variable BREAKWATER_CACHE_THRESHHOLD is set but is not a setting and is ignored (did you mean BREAKWATER_CACHE_THRESHOLD?)",
		"config: environment variable BREAKWATER_LOG_LEVEL is set but is not a setting and is ignored (did you mean BREAKWATER_SERVER_LOG_LEVEL?)",
		"config: environment variable BREAKWATER_SOMETHING_ELSE is set but is not a setting and is ignored",
		"config: environment variable BREAKWATER_URL is set but is not a setting and is ignored",
	}
	if !slices.Equal(got, want) {
		t.Errorf("UnknownEnv =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
