package stored

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestSSERenderMatchesReplay: a kept render, patched with a fresh id and
// created, is byte for byte what replay writes for that id and created,
// for chat and text completions, with and without usage, and with content
// that quotes the placeholders.
func TestSSERenderMatchesReplay(t *testing.T) {
	now := time.Unix(1800000000, 0)
	for _, tc := range []struct{ name, body, prefix string }{
		{"chat", `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France, said \"id\":\"chatcmpl-bwzzzzzzzzzzzzzzzzzzzzzzzz\" and \"created\":9999999999."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}}`, "chatcmpl-bw"},
		{"tools", `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"gpt-test","system_fingerprint":"fp_1","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`, "chatcmpl-bw"},
		{"text", `{"id":"cmpl-3","object":"text_completion","created":1,"model":"gpt-test","choices":[{"index":0,"text":"once upon a time","finish_reason":"length"}]}`, "cmpl-bw"},
	} {
		for _, usage := range []bool{false, true} {
			r, err := renderSSE([]byte(tc.body), tc.prefix, usage)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var got bytes.Buffer
			if err := r.write(&got, nil, now); err != nil {
				t.Fatal(err)
			}
			// The fresh id is the first event's.
			first := strings.TrimPrefix(strings.SplitN(got.String(), "\n", 2)[0], "data: ")
			var ev struct{ ID string }
			if err := json.Unmarshal([]byte(first), &ev); err != nil || !strings.HasPrefix(ev.ID, tc.prefix) || len(ev.ID) != len(tc.prefix)+24 {
				t.Fatalf("%s: first event %s (id %q): %v", tc.name, first, ev.ID, err)
			}
			var want bytes.Buffer
			if err := replay(&want, nil, []byte(tc.body), ev.ID, now.Unix(), usage); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("%s usage=%v: render\n%s\nreplay\n%s", tc.name, usage, got.String(), want.String())
			}
			if n := strings.Count(got.String(), ev.ID); n != len(r.ids) || n == 0 {
				t.Errorf("%s: id written %d times, %d placeholders", tc.name, n, len(r.ids))
			}
		}
	}
}
