package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/config"
)

func TestMainCheckWarnsOfUnknownVariables(t *testing.T) {
	vars := map[string]string{
		config.UpstreamURLEnv:       "http://127.0.0.1:9/v1",
		"BREAKWATER_LOG_LEVEL":      "debug",
		"BREAKWATER_CACHE_ENABLED":  "false",
		"BREAKWATER_CACHE_TRESHOLD": "0.95",
	}
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	err := Main(context.Background(), []string{"-check"}, &stdout, &stderr, func(k string) string { return vars[k] }, environ)
	if err != nil {
		t.Fatalf("Main -check: %v", err)
	}
	if got := stdout.String(); got != "config ok\n" {
		t.Errorf("stdout = %q, want %q", got, "config ok\n")
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	want := []string{
		"warning: config: environment variable BREAKWATER_CACHE_TRESHOLD is set but is not a setting and is ignored (did you mean BREAKWATER_CACHE_THRESHOLD?)",
		"warning: config: environment variable BREAKWATER_LOG_LEVEL is set but is not a setting and is ignored (did you mean BREAKWATER_SERVER_LOG_LEVEL?)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr =\n%s\nwant\n%s", stderr.String(), strings.Join(want, "\n"))
	}
}

// TestMainCheckListsEveryProblem: -check fails on what start-up would
// refuse (unset key variables, a data folder that cannot be made, a bad
// listen address), every problem in one run; serve refuses the same list
// before listening.
func TestMainCheckListsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "not-a-folder")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "breakwater.toml")
	toml := `
default_upstream = "openai"
[server]
listen = "127.0.0.1:80800"
[cache]
data_dir = "` + filepath.ToSlash(filepath.Join(file, "data")) + `"
[[upstreams]]
name = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "CHECK_OPENAI_KEY"
[[upstreams]]
name = "anthropic"
base_url = "https://api.anthropic.com/v1"
api_key_env = "CHECK_ANTHROPIC_KEY"
auth = "x-api-key"
`
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	for _, args := range [][]string{{"-check", "-config", path}, {"-config", path}} {
		var stdout, stderr bytes.Buffer
		err := Main(t.Context(), args, &stdout, &stderr, noEnv, nil)
		if err == nil {
			t.Fatalf("Main %v = nil, want the problems", args)
		}
		for _, want := range []string{
			`server.listen = "127.0.0.1:80800": port must be a number in 0-65535`,
			`upstreams[0].api_key_env = "CHECK_OPENAI_KEY": the variable is not set`,
			`upstreams[1].api_key_env = "CHECK_ANTHROPIC_KEY": the variable is not set`,
			`cache.data_dir = "` + filepath.Join(file, "data") + `": ` + file + ` is not a folder`,
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Main %v: no %q in\n%v", args, want, err)
			}
		}
		if strings.Contains(stdout.String(), "config ok") {
			t.Errorf("Main %v printed config ok", args)
		}
	}
}
