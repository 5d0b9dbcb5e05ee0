package anthropic

import (
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

func TestMessagesKey(t *testing.T) {
	v1 := map[string]string{"Anthropic-Version": "2023-06-01"}
	key := func(body string, h map[string]string) wire.Key {
		t.Helper()
		k, err := MessagesKey("p", []byte(body), nil, h)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return k
	}
	base := key(`{"model":"claude","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":"Where is Paris?"}]}`, v1)
	if base.Query != "Where is Paris?" || base.Fingerprint == "" || base.Model != "claude" {
		t.Fatalf("key = %+v, want the final user text embedded", base)
	}
	same := []string{
		// metadata, stream and cache_control do not change the answer.
		`{"model":"claude","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":"Where is Paris?"}],"metadata":{"user_id":"u1"},"stream":true}`,
		`{"messages":[{"role":"user","content":"Where is Paris?"}],"system":"Be brief.","max_tokens":64,"model":"claude"}`,
	}
	for _, b := range same {
		if k := key(b, v1); k.Exact != base.Exact {
			t.Errorf("%s: exact key differs", b)
		}
	}
	blocks := key(`{"model":"claude","max_tokens":64,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"Where is Paris?","cache_control":{"type":"ephemeral"}}]}]}`, v1)
	cached := key(`{"model":"claude","max_tokens":64,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"Where is Paris?"}]}]}`, v1)
	if blocks.Exact != cached.Exact || blocks.Query != "Where is Paris?" {
		t.Errorf("cache_control markers changed the key")
	}
	// A paraphrase shares the fingerprint; another context does not.
	if k := key(`{"model":"claude","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":"Where's Paris?"}]}`, v1); k.Fingerprint != base.Fingerprint || k.Exact == base.Exact {
		t.Errorf("paraphrase: fingerprint shared %v, exact differs %v", k.Fingerprint == base.Fingerprint, k.Exact != base.Exact)
	}
	for name, b := range map[string]string{
		"system":   `{"model":"claude","max_tokens":64,"system":"Be long.","messages":[{"role":"user","content":"Where is Paris?"}]}`,
		"thinking": `{"model":"claude","max_tokens":64,"system":"Be brief.","thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"Where is Paris?"}]}`,
		"tools":    `{"model":"claude","max_tokens":64,"system":"Be brief.","tools":[{"name":"w","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Where is Paris?"}]}`,
		"stop":     `{"model":"claude","max_tokens":64,"system":"Be brief.","stop_sequences":["."],"messages":[{"role":"user","content":"Where is Paris?"}]}`,
	} {
		if k := key(b, v1); k.Fingerprint == base.Fingerprint || k.Exact == base.Exact {
			t.Errorf("%s: shares the context of the base request", name)
		}
	}
	if k := key(`{"model":"claude","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":"Where is Paris?"}]}`,
		map[string]string{"Anthropic-Version": "2023-06-01", "Anthropic-Beta": "x"}); k.Exact == base.Exact || k.Fingerprint == base.Fingerprint {
		t.Error("anthropic-beta ignored")
	}
	// Images, tool results and prefills: exact tier only.
	for _, b := range []string{
		`{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"text","text":"What is this?"}]}]}`,
		`{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"w","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"sunny"}]}]}`,
		`{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":"Where is Paris?"},{"role":"assistant","content":"Paris is"}]}`,
	} {
		if k := key(b, v1); k.Query != "" {
			t.Errorf("%s: query %q, want exact tier only", b, k.Query)
		}
	}
	for _, b := range []string{`{"model":"claude","messages":[]}`, `{"messages":[{"role":"user","content":"x"}]}`, `[]`} {
		if _, err := MessagesKey("p", []byte(b), nil, nil); err == nil {
			t.Errorf("%s: no error", b)
		}
	}
}
