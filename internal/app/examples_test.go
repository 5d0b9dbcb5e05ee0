package app

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestExamplesPassCheck runs every config in examples/ (and the reference
// config.example.toml) through `breakwater -check` with the variables they
// name set, and, for those that name any, without them: -check must then
// name every missing variable.
func TestExamplesPassCheck(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("examples/ holds %d configs, want at least 5 (OpenAI, OpenAI + Anthropic, Gemini, vLLM fallback, fleet on Qdrant)", len(files))
	}
	files = append(files, "../../config.example.toml")
	named := regexp.MustCompile(`(?m)^\s*[a-z_]*_env\s*=\s*"([A-Za-z_][A-Za-z0-9_]*)"`)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			vars := map[string]string{"BREAKWATER_CACHE_DATA_DIR": t.TempDir()}
			var names []string
			for _, m := range named.FindAllStringSubmatch(string(data), -1) {
				vars[m[1]] = "test-value-" + m[1]
				names = append(names, m[1])
			}
			var stdout, stderr bytes.Buffer
			if err := Main(t.Context(), []string{"-check", "-config", f}, &stdout, &stderr, func(k string) string { return vars[k] }, nil); err != nil {
				t.Fatalf("-check with %v set: %v", names, err)
			}
			// A file with [[budgets]] and no Redis says they apply per replica.
			out := stdout.String()
			if strings.Contains(string(data), "[[budgets]]") && !strings.Contains(string(data), `redis_url = "redis`) {
				b, rest, _ := strings.Cut(out, "\n")
				if !strings.HasPrefix(b, "budgets: ") || !strings.Contains(b, "per replica") {
					t.Errorf("-check: stdout %q: want the budgets' scope first", out)
				}
				out = rest
			}
			if out != "config ok\n" || stderr.Len() != 0 {
				t.Errorf("-check: stdout %q, stderr %q", stdout.String(), stderr.String())
			}
			var keys []string
			for _, n := range names {
				if n != "BREAKWATER_PARTITION_SECRET" && n != "BREAKWATER_ADMIN_TOKEN" { // optional secrets
					keys = append(keys, n)
				}
			}
			if len(keys) == 0 {
				return
			}
			only := map[string]string{"BREAKWATER_CACHE_DATA_DIR": vars["BREAKWATER_CACHE_DATA_DIR"]}
			err = Main(t.Context(), []string{"-check", "-config", f}, &bytes.Buffer{}, &bytes.Buffer{}, func(k string) string { return only[k] }, nil)
			for _, n := range keys {
				if err == nil || !strings.Contains(err.Error(), `"`+n+`": the variable is not set`) {
					t.Errorf("-check without %s: %v", n, err)
				}
			}
		})
	}
}
