package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBaseURLEndingInEndpoint: a base_url that already ends in the path
// Breakwater appends is refused, and the message gives the API root.
func TestBaseURLEndingInEndpoint(t *testing.T) {
	for base, root := range map[string]string{
		"https://api.openai.com/v1/chat/completions":                                               "https://api.openai.com/v1",
		"https://api.openai.com/v1/chat/completions/":                                              "https://api.openai.com/v1",
		"https://api.anthropic.com/v1/messages":                                                    "https://api.anthropic.com/v1",
		"http://127.0.0.1:8000/v1/responses":                                                       "http://127.0.0.1:8000/v1",
		"http://127.0.0.1:8000/v1/completions":                                                     "http://127.0.0.1:8000/v1",
		"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent": "https://generativelanguage.googleapis.com/v1beta",
	} {
		path := writeFile(t, "[[upstreams]]\nname = \"u\"\nbase_url = \""+base+"\"\n")
		_, err := Load(path, envOf(nil))
		if err == nil || !strings.Contains(err.Error(), `upstreams[0].base_url`) || !strings.Contains(err.Error(), `use "`+root+`"`) {
			t.Errorf("base_url %s: Load() = %v, want a refusal naming %s", base, err, root)
		}
	}
	// From the environment, the message names the variable.
	_, err := Load("", envOf(map[string]string{UpstreamURLEnv: "http://127.0.0.1:8000/v1/chat/completions"}))
	if err == nil || !strings.HasPrefix(err.Error(), "config: "+UpstreamURLEnv+" (upstreams[0].base_url) = ") || !strings.Contains(err.Error(), `use "http://127.0.0.1:8000/v1"`) {
		t.Errorf("%s with an endpoint path: %v", UpstreamURLEnv, err)
	}
	for _, ok := range []string{"https://api.openai.com/v1", "https://generativelanguage.googleapis.com/v1beta", "http://127.0.0.1:8000/openai/v1"} {
		if _, err := Load("", envOf(map[string]string{UpstreamURLEnv: ok})); err != nil {
			t.Errorf("API root %s refused: %v", ok, err)
		}
	}
}

// TestUpstreamURLEnvIgnoredWarns: BREAKWATER_UPSTREAM_URL beside a file that
// declares [[upstreams]] does nothing, and says so.
func TestUpstreamURLEnvIgnoredWarns(t *testing.T) {
	path := writeFile(t, "[[upstreams]]\nname = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\n")
	env := map[string]string{UpstreamURLEnv: "http://127.0.0.1:8000/v1"}
	c := mustLoad(t, path, env)
	w := c.UnknownEnv([]string{UpstreamURLEnv + "=http://127.0.0.1:8000/v1"})
	if len(w) != 1 || !strings.Contains(w[0], UpstreamURLEnv+" is set but the config declares [[upstreams]]") {
		t.Errorf("warnings %q, want one about %s being ignored", w, UpstreamURLEnv)
	}
	// Without a file it is the upstream: no warning.
	c = mustLoad(t, "", env)
	if w := c.UnknownEnv([]string{UpstreamURLEnv + "=http://127.0.0.1:8000/v1/"}); len(w) != 0 {
		t.Errorf("warnings %q for the variable in use", w)
	}
}

// TestCheckEnvironmentListsEveryProblem: every unset key variable and an
// unusable data folder, one line each, in one error.
func TestCheckEnvironmentListsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, `
default_upstream = "openai"
[cache]
data_dir = "`+filepath.ToSlash(filepath.Join(file, "data"))+`"
[[upstreams]]
name = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "FH_OPENAI_KEY"
[[upstreams]]
name = "anthropic"
base_url = "https://api.anthropic.com/v1"
api_key_env = "FH_ANTHROPIC_KEY"
auth = "x-api-key"
`)
	c := mustLoad(t, path, nil)
	err := c.CheckEnvironment(envOf(nil))
	if err == nil {
		t.Fatal("CheckEnvironment() = nil, want three problems")
	}
	lines := strings.Split(err.Error(), "\n")
	for i, want := range []string{
		`config: upstreams[0].api_key_env = "FH_OPENAI_KEY": the variable is not set`,
		`config: upstreams[1].api_key_env = "FH_ANTHROPIC_KEY": the variable is not set`,
		`config: cache.data_dir = "` + filepath.Join(file, "data") + `": ` + file + ` is not a folder`,
	} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], want) {
			t.Errorf("problem %d: want %q, got:\n%s", i, want, err)
		}
	}
	if len(lines) != 3 {
		t.Errorf("%d problems, want 3:\n%s", len(lines), err)
	}
	// With the variables set and a writable folder: no problem, and the
	// folder is not created by the check.
	data := filepath.Join(dir, "new", "data")
	c.Cache.DataDir, c.Vector.Path = data, filepath.Join(data, defaultVectorsDirectory)
	if err := c.CheckEnvironment(envOf(map[string]string{"FH_OPENAI_KEY": "k", "FH_ANTHROPIC_KEY": "k"})); err != nil {
		t.Errorf("CheckEnvironment() = %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("the check created %s (err %v)", data, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the check left files in %s: %v", dir, entries)
	}
}
