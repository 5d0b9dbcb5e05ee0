package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

const examplePath = "../config.example.toml"

// TestExampleLoads: the reference runs as written (one upstream, no
// variables needed) and its [[upstreams]] and [[models]] entries hold the
// defaults of an entry: the same file with only the required keys loads to
// the same configuration.
func TestExampleLoads(t *testing.T) {
	c := mustLoad(t, examplePath, nil)
	if got, want := c.DefaultUpstream, "openai"; got != want {
		t.Errorf("default_upstream = %q, want %q (the only upstream)", got, want)
	}
	if len(c.Upstreams) != 1 || len(c.Models) != 1 {
		t.Fatalf("%d upstreams, %d models: want one of each", len(c.Upstreams), len(c.Models))
	}
	minimal := mustLoad(t, writeFile(t, `
[[upstreams]]
name = "openai"
base_url = "https://api.openai.com/v1"
[upstreams.pools.realtime]
[[models]]
name = "gpt-4o-mini"
targets = [{ upstream = "openai" }]
`), nil)
	if !reflect.DeepEqual(c.Upstreams, minimal.Upstreams) {
		t.Errorf("example [[upstreams]] = %+v\nwant the defaults %+v", c.Upstreams, minimal.Upstreams)
	}
	if !reflect.DeepEqual(c.Models, minimal.Models) {
		t.Errorf("example [[models]] = %+v\nwant the defaults %+v", c.Models, minimal.Models)
	}
	if len(c.APIUpstreams) != len(minimal.APIUpstreams) || c.DefaultUpstream != minimal.DefaultUpstream {
		t.Errorf("example top-level upstreams %q %v, want the defaults %q %v", c.DefaultUpstream, c.APIUpstreams,
			minimal.DefaultUpstream, minimal.APIUpstreams)
	}
	if err := c.CheckEnvironment(envOf(nil)); err != nil && !strings.Contains(err.Error(), "data_dir") {
		t.Errorf("the example needs variables: %v", err)
	}
}

// TestExampleShowsDefaults keeps the example honest: its sections hold the
// defaults it documents.
func TestExampleShowsDefaults(t *testing.T) {
	c := mustLoad(t, examplePath, nil)
	d := Default()
	sections := []struct {
		name      string
		got, want any
	}{
		{"server", c.Server, d.Server},
		{"cache", c.Cache, d.Cache},
		{"vector", c.Vector, d.Vector},
		{"embed", c.Embed, d.Embed},
		{"retry", c.Retry, d.Retry},
		{"breaker", c.Breaker, d.Breaker},
		{"stream", c.Stream, d.Stream},
	}
	for _, s := range sections {
		t.Run(s.name, func(t *testing.T) {
			if !reflect.DeepEqual(s.got, s.want) {
				t.Errorf("[%s] = %+v\nwant the defaults %+v", s.name, s.got, s.want)
			}
		})
	}
}

// allKeys lists every key Config has, "*" standing for an array entry's or
// a map's any element: "upstreams.*.pools.*.max_queue".
func allKeys(t reflect.Type, prefix []string) [][]string {
	var out [][]string
	for f := range t.Fields() {
		name := tomlName(f)
		if f.Anonymous && name == "" {
			out = append(out, allKeys(f.Type, prefix)...) // an embedded option type's keys
			continue
		}
		if name == "" {
			continue
		}
		path := append(append([]string{}, prefix...), name)
		ft := f.Type
		switch {
		case ft == durationType || ft == sizeType || ft == timeDuration:
		case ft.Kind() == reflect.Struct:
			out = append(out, allKeys(ft, path)...)
			continue
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, allKeys(ft.Elem(), append(path, "*"))...)
			continue
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			out = append(out, allKeys(ft.Elem(), append(path, "*"))...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// hasPath reports whether the generic parse holds path ("*": any element).
func hasPath(raw any, path []string) bool {
	if len(path) == 0 {
		return true
	}
	switch v := raw.(type) {
	case map[string]any:
		if path[0] == "*" {
			for _, e := range v {
				if hasPath(e, path[1:]) {
					return true
				}
			}
			return false
		}
		e, ok := v[path[0]]
		return ok && hasPath(e, path[1:])
	case []any:
		if path[0] != "*" {
			return false
		}
		for _, e := range v {
			if hasPath(e, path[1:]) {
				return true
			}
		}
	}
	return false
}

// TestExampleHasEveryKey: docs cannot drift from Config. Every key is set in
// the example (not only mentioned in a comment), so a renamed field fails
// here and a renamed key fails strict decoding.
func TestExampleHasEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := toml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	keys := allKeys(reflect.TypeFor[Config](), nil)
	if got, min := len(keys), 60; got < min {
		t.Fatalf("allKeys found %d keys, want at least %d", got, min)
	}
	for _, k := range keys {
		key := strings.Join(k, ".")
		t.Run(key, func(t *testing.T) {
			if !hasPath(raw, k) {
				t.Errorf("%s: key %s is not set in the example", examplePath, key)
			}
		})
	}
}

// TestExampleCommentsEveryKey: every key line has a comment right above it
// (or on the same line).
func TestExampleCommentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	keyLine := regexp.MustCompile(`^\s*([a-z_]+)\s*=`)
	lines := strings.Split(string(data), "\n")
	n := 0
	for i, line := range lines {
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		documented := strings.Contains(line, "#") ||
			(i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#"))
		if !documented {
			t.Errorf("%s:%d: key %s has no comment above it", examplePath, i+1, m[1])
		}
	}
	if n == 0 {
		t.Fatal("no key lines found in the example")
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	for _, c := range []*Config{Default(), validConfig(), mustLoad(t, examplePath, nil)} {
		data, err := c.Marshal()
		if err != nil {
			t.Fatalf("Marshal() = %v", err)
		}
		got := mustLoad(t, writeFile(t, string(data)), nil)
		if !reflect.DeepEqual(got, c) {
			t.Errorf("Load(Marshal(c)) =\n%+v\nwant\n%+v\nTOML:\n%s", got, c, data)
		}
	}
}

func TestDurationText(t *testing.T) {
	tests := []struct {
		in      string
		want    Duration
		wantErr bool
	}{
		{"200ms", Duration(200 * time.Millisecond), false},
		{"1m30s", Duration(90 * time.Second), false},
		{" 24h ", Duration(24 * time.Hour), false},
		{"0s", 0, false},
		{"0", 0, false}, // time.ParseDuration allows a bare zero
		{"-1s", Duration(-time.Second), false},
		{"5", 0, true},
		{"5 sec", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d Duration
			err := d.UnmarshalText([]byte(tt.in))
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("UnmarshalText(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), durationHint) {
					t.Errorf("error %q does not say what is allowed", err)
				}
				return
			}
			if got, want := d, tt.want; got != want {
				t.Errorf("UnmarshalText(%q) = %v, want %v", tt.in, got, want)
			}
			text, _ := d.MarshalText()
			var back Duration
			if err := back.UnmarshalText(text); err != nil || back != d {
				t.Errorf("MarshalText round trip: %q → %v, %v", text, back, err)
			}
		})
	}
}

func TestSizeText(t *testing.T) {
	tests := []struct {
		in      string
		want    Size
		wantErr bool
	}{
		{"4194304", 4 * MiB, false},
		{"4MiB", 4 * MiB, false},
		{"4 MiB", 4 * MiB, false},
		{"512KiB", 512 * KiB, false},
		{"1GiB", GiB, false},
		{"10MB", 10_000_000, false},
		{"100B", 100, false},
		{"0", 0, false},
		{"-1", -1, false}, // parsed; Validate refuses it with the key
		{"4.5MiB", 0, true},
		{"4 mebibytes", 0, true},
		{"MiB", 0, true},
		{"99999999999GiB", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s Size
			err := s.UnmarshalText([]byte(tt.in))
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("UnmarshalText(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got, want := s, tt.want; got != want {
				t.Errorf("UnmarshalText(%q) = %d, want %d", tt.in, got, want)
			}
			text, _ := s.MarshalText()
			var back Size
			if err := back.UnmarshalText(text); err != nil || back != s {
				t.Errorf("MarshalText round trip: %q → %d, %v", text, back, err)
			}
		})
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0"},
		{4 * MiB, "4MiB"},
		{1536 * KiB, "1536KiB"},
		{GiB, "1GiB"},
		{1000, "1000"},
		{-2 * MiB, "-2MiB"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
	}
}

func TestUpstreamLookup(t *testing.T) {
	c := validConfig()
	u, ok := c.Upstream("local")
	if !ok {
		t.Fatal(`Upstream("local") not found`)
	}
	if got, want := u.BaseURL, "http://localhost:8000/v1"; got != want {
		t.Errorf("base_url = %q, want %q", got, want)
	}
	if _, ok := c.Upstream("azure"); ok {
		t.Error(`Upstream("azure") found, want not found`)
	}
}
