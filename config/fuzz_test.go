package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad loads arbitrary files: every one is refused with an error naming
// the file, or loads into a configuration that validates. Nothing panics.
func FuzzLoad(f *testing.F) {
	for _, glob := range []string{"testdata/good/*.toml", "testdata/bad/*.toml", "../config.example.toml"} {
		names, err := filepath.Glob(glob)
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("[cache]\nthreshold = 1e400\nexact_max_bytes = \"-1KiB\"\n[[upstreams]]\nname = \"\\u0000\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.toml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, func(string) string { return "" })
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("empty error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load returned a config that does not validate: %v", err)
		}
	})
}
