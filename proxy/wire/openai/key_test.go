package openai

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/keytest"
)

// The key tests' shared helpers (cache/keytest).
var (
	readRequest   = keytest.ReadRequest
	decodeNumbers = keytest.DecodeNumbers
	reformat      = keytest.Reformat
	addSeeds      = keytest.AddSeeds
)

func TestKeyErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"invalid json", `{"model":`, "not valid JSON"},
		{"trailing data", `{"model":"m","messages":[{"role":"user","content":"x"}]} {}`, "after the top-level value"},
		{"not an object", `["model"]`, "must be a JSON object"},
		{"invalid utf-8", "{\"model\":\"m\xff\"}", "UTF-8"},
		{"missing model", `{"messages":[{"role":"user","content":"x"}]}`, `"model"`},
		{"model not a string", `{"model":4,"messages":[{"role":"user","content":"x"}]}`, `"model"`},
		{"empty model", `{"model":"","messages":[{"role":"user","content":"x"}]}`, `"model"`},
		{"missing messages", `{"model":"m"}`, `"messages"`},
		{"empty messages", `{"model":"m","messages":[]}`, `"messages"`},
		{"message not an object", `{"model":"m","messages":["hi"]}`, "messages[0] must be an object"},
		{"message without role", `{"model":"m","messages":[{"content":"hi"}]}`, `messages[0] must have a string "role"`},
		{"content a number", `{"model":"m","messages":[{"role":"user","content":3}]}`, "messages[0].content"},
		{"text part without text", `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0]"},
		{"temperature a string", `{"model":"m","temperature":"hot","messages":[{"role":"user","content":"x"}]}`, `"temperature"`},
		{"stream a string", `{"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]}`, `"stream"`},
		{"number out of range", `{"model":"m","top_p":1e9999999,"messages":[{"role":"user","content":"x"}]}`, "out of range"},
		{"number out of range once normalised", `{"model":"m","top_p":100000e999997,"messages":[{"role":"user","content":"x"}]}`, "out of range"},
		{"duplicate field", `{"model":"m","model":"n","messages":[{"role":"user","content":"x"}]}`, `duplicate field "model"`},
		{"nested duplicate field", `{"model":"m","messages":[{"role":"user","content":"x","role":"system"}]}`, `duplicate field "role"`},
		{"lone high surrogate", `{"model":"m","messages":[{"role":"user","content":"zz\ud800zz"}]}`, `lone surrogate escape \ud800`},
		{"lone low surrogate", `{"model":"m","messages":[{"role":"user","content":"zz\udc00zz"}]}`, `lone surrogate escape \udc00`},
		{"reversed pair", `{"model":"m","messages":[{"role":"user","content":"\udc00\ud800"}]}`, `lone surrogate escape`},
		{"high then non-low", `{"model":"m","messages":[{"role":"user","content":"\ud800\u0041"}]}`, `lone surrogate escape \ud800`},
		{"surrogate in a name", `{"model":"m","\ud800":1,"messages":[{"role":"user","content":"x"}]}`, `lone surrogate escape`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ChatKey("p", []byte(tt.body), nil)
			if !errors.Is(err, cache.ErrBadRequest) {
				t.Fatalf("ChatKey error = %v, want cache.ErrBadRequest", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ChatKey error = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestChatKeyQuery(t *testing.T) {
	tests := []struct {
		file, want string
	}{
		{"chat_simple.json", "What is the capital of France?"},
		{"chat_multipart.json", "Describe this picture.\nIn one sentence."},
		{"chat_tools.json", "And in \"Lyon\" — in °C?\n"},
		{"chat_assistant_last.json", ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			k, err := ChatKey("p", readRequest(t, tt.file), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.Query; got != tt.want {
				t.Errorf("Query = %q, want %q", got, tt.want)
			}
			if got, want := k.SemanticEligible(), tt.want != ""; got != want {
				t.Errorf("SemanticEligible = %v, want %v", got, want)
			}
			if len(k.Exact) != 64 || len(k.Fingerprint) != 64 {
				t.Errorf("Exact %q, Fingerprint %q: want hex SHA-256", k.Exact, k.Fingerprint)
			}
		})
	}
}

func TestChatKeyFields(t *testing.T) {
	k, err := ChatKey("p", readRequest(t, "chat_simple.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := k.Model, "gpt-4o-mini"; got != want {
		t.Errorf("Model = %q, want %q", got, want)
	}
	if k.Temperature == nil || *k.Temperature != 0.2 {
		t.Errorf("Temperature = %v, want 0.2", k.Temperature)
	}
	if !k.Stream {
		t.Error("Stream = false, want true")
	}
	if got, want := k.Endpoint, ChatEndpoint; got != want {
		t.Errorf("Endpoint = %q, want %q", got, want)
	}
}

// TestChatKeyCompare changes one thing in a request and checks which parts of
// the key follow.
func TestChatKeyCompare(t *testing.T) {
	const base = `{"model":"m1","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q1"},{"role":"assistant","content":"A1"},{"role":"user","content":"hello"}],"temperature":0.5}`
	groups := func(m string) string {
		if strings.HasPrefix(m, "m") {
			return "group-m"
		}
		return ""
	}
	tests := []struct {
		name              string
		other             string
		partition         string
		sameExact, sameFP bool
	}{
		{"identical", base, "p", true, true},
		{"ignored fields", strings.Replace(base, `"temperature"`, `"stream":true,"user":"bob","store":true,"temperature"`, 1), "p", true, true},
		{"final user text", strings.Replace(base, `"hello"`, `"hello there"`, 1), "p", false, true},
		{"final text as parts", strings.Replace(base, `"content":"hello"`, `"content":[{"type":"text","text":"hello"}]`, 1), "p", false, true},
		{"model in same group", strings.Replace(base, `"m1"`, `"m2"`, 1), "p", false, true},
		{"model in no group", strings.Replace(base, `"m1"`, `"x1"`, 1), "p", false, false},
		{"system prompt", strings.Replace(base, `"S"`, `"S2"`, 1), "p", false, false},
		{"earlier turn", strings.Replace(base, `"A1"`, `"A2"`, 1), "p", false, false},
		{"temperature", strings.Replace(base, `0.5`, `0.7`, 1), "p", false, false},
		{"temperature spelling", strings.Replace(base, `0.5`, `5e-1`, 1), "p", true, true},
		{"tools", strings.Replace(base, `"temperature"`, `"tools":[{"type":"function","function":{"name":"f"}}],"temperature"`, 1), "p", false, false},
		{"n", strings.Replace(base, `"temperature"`, `"n":2,"temperature"`, 1), "p", false, false},
		{"final image", strings.Replace(base, `"content":"hello"`, `"content":[{"type":"text","text":"hello"},{"type":"image_url","image_url":{"url":"u"}}]`, 1), "p", false, false},
		{"partition", base, "q", false, true},
	}
	a, err := ChatKey("p", []byte(base), groups)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ChatKey(tt.partition, []byte(tt.other), groups)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Exact == b.Exact; got != tt.sameExact {
				t.Errorf("same Exact = %v, want %v", got, tt.sameExact)
			}
			if got := a.Fingerprint == b.Fingerprint; got != tt.sameFP {
				t.Errorf("same Fingerprint = %v, want %v", got, tt.sameFP)
			}
		})
	}
}

func FuzzChatKey(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		k, err := ChatKey("p", body, nil)
		if err != nil {
			if !errors.Is(err, cache.ErrBadRequest) {
				t.Fatalf("ChatKey error %v is not cache.ErrBadRequest", err)
			}
			return
		}
		obj := decodeNumbers(t, body).(map[string]any)
		check := func(name string, body []byte, sameExact, sameFP bool) {
			t.Helper()
			k2, err := ChatKey("p", body, nil)
			if err != nil {
				t.Fatalf("%s: ChatKey: %v", name, err)
			}
			if got := k2.Exact == k.Exact; got != sameExact {
				t.Errorf("%s: same Exact = %v, want %v", name, got, sameExact)
			}
			if got := k2.Fingerprint == k.Fingerprint; got != sameFP {
				t.Errorf("%s: same Fingerprint = %v, want %v", name, got, sameFP)
			}
		}
		with := func(field string, v any) []byte {
			m := make(map[string]any, len(obj)+1)
			for name, val := range obj {
				m[name] = val
			}
			m[field] = v
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}

		re := reformat(t, obj)
		if k2, err := ChatKey("p", re, nil); err != nil || k2.Exact != k.Exact || k2.Fingerprint != k.Fingerprint || k2.Query != k.Query {
			t.Fatalf("reformatted request changed the key: %+v vs %+v (%v)", k2, k, err)
		}
		for _, f := range []string{"stream_options", "user", "metadata", "store", "service_tier", "request_id"} {
			check("ignored "+f, with(f, map[string]any{"x": "y"}), true, true)
		}
		check("model", with("model", k.Model+"-x"), false, false)
		temp := 0.25
		if k.Temperature != nil && *k.Temperature == temp {
			temp = 0.75
		}
		check("temperature", with("temperature", temp), false, false)
		if _, ok := obj["tools"]; !ok {
			check("tools", with("tools", []any{map[string]any{"type": "function", "function": map[string]any{"name": "fuzz_tool"}}}), false, false)
		}
		if k2, err := ChatKey("q", body, nil); err != nil || k2.Exact == k.Exact {
			t.Errorf("partition did not change Exact (%v)", err)
		}

		msgs := obj["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		if s, ok := last["content"].(string); ok && last["role"] == "user" {
			nl := make(map[string]any, len(last))
			for name, v := range last {
				nl[name] = v
			}
			nl["content"] = s + " please"
			nm := append(slices.Clone(msgs[:len(msgs)-1]), nl)
			check("final user text", with("messages", nm), false, true)
		}
	})
}

// TestKeySurrogatesDistinct is finding 6 of the hardening audit: encoding/json
// decodes a lone surrogate escape to U+FFFD, so these three bodies shared one
// exact key. Now the two lone surrogates are refused and U+FFFD keeps its key.
func TestKeySurrogatesDistinct(t *testing.T) {
	body := func(s string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"` + s + `"}]}`)
	}
	k, err := ChatKey("p", body(`zz\ufffdzz`), nil)
	if err != nil {
		t.Fatalf("escaped U+FFFD refused: %v", err)
	}
	if k.Query != "zz\ufffdzz" {
		t.Errorf("Query = %q", k.Query)
	}
	for _, s := range []string{`zz\ud800zz`, `zz\udc00zz`, `zz\ud800`, `\udfff`} {
		k2, err := ChatKey("p", body(s), nil)
		if !errors.Is(err, cache.ErrBadRequest) {
			t.Errorf("%s: error = %v (exact same as U+FFFD: %v), want cache.ErrBadRequest", s, err, k2.Exact == k.Exact)
		}
	}
}

// TestKeyExactFieldNames is finding 7: the key reads "model" only, never
// "MODEL" or "Model", and a second "model" is refused rather than picked.
func TestKeyExactFieldNames(t *testing.T) {
	k, err := ChatKey("p", []byte(`{"model":"gpt","MODEL":"cheap","Stream":true,"Temperature":2,"messages":[{"role":"user","content":"x"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if k.Model != "gpt" || k.Stream || k.Temperature != nil {
		t.Errorf("key = model %q stream %v temperature %v, want gpt false nil", k.Model, k.Stream, k.Temperature)
	}
	k, err = ChatKey("p", []byte(`{"model":"gpt","stream":true,"stream_options":{"Include_Usage":true},"messages":[{"role":"user","content":"x"}]}`), nil)
	if err != nil || k.IncludeUsage {
		t.Errorf("IncludeUsage = %v (%v), want false for Include_Usage", k.IncludeUsage, err)
	}
	k, err = ChatKey("p", []byte(`{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`), nil)
	if err != nil || !k.IncludeUsage {
		t.Errorf("IncludeUsage = %v (%v), want true", k.IncludeUsage, err)
	}
}
