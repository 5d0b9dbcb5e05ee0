package app

import (
	"bytes"
	"context"
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
