package config

import (
	"strings"
	"testing"
)

// [api_upstreams] names each registered API's home upstream; a name that is
// no registered API, or an upstream that is not declared, is refused with
// the key and what is allowed, and the per-API keys it replaced say where
// the setting went.
func TestAPIUpstreams(t *testing.T) {
	const ups = "default_upstream = \"a\"\n[[upstreams]]\nname = \"a\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[[upstreams]]\nname = \"b\"\nbase_url = \"http://127.0.0.1:2\"\n"
	c := mustLoad(t, writeFile(t, ups+"[api_upstreams]\nanthropic = \"b\"\n"), nil)
	if c.APIUpstreams["anthropic"] != "b" || len(c.APIUpstreams) != 1 {
		t.Errorf("APIUpstreams = %v, want anthropic = b", c.APIUpstreams)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"unknown API", "[api_upstreams]\nclaude = \"b\"\n", `api_upstreams.claude = "b": no wire API named "claude" (have: `},
		{"unknown upstream", "[api_upstreams]\ngemini = \"c\"\n", `api_upstreams.gemini = "c": no [[upstreams]] named "c"`},
		{"old key", "gemini_upstream = \"b\"\n", `unknown key "gemini_upstream" (an API's home upstream is set in the [api_upstreams] table: gemini = "<upstream>")`},
	} {
		body := tc.body + ups
		if strings.HasPrefix(tc.body, "[") {
			// A table's keys end at the next table: upstreams first.
			body = ups + tc.body
		}
		_, err := Load(writeFile(t, body), envOf(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Load() = %v, want an error containing %s", tc.name, err, tc.want)
		}
	}
}
