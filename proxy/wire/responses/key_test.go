package responses

import (
	"errors"
	"testing"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

func responsesKey(t *testing.T, body string) wire.Key {
	t.Helper()
	k, err := ResponsesKey("p1", []byte(body))
	if err != nil {
		t.Fatalf("ResponsesKey(%s): %v", body, err)
	}
	return k
}

// Every field that shapes a Responses answer separates both the exact key
// and the context fingerprint, while the question text stays the same.
func TestResponsesKeyContextFields(t *testing.T) {
	base := `{"model":"gpt-test","input":"What is the capital of France?"}`
	baseKey := responsesKey(t, base)
	if baseKey.Query != "What is the capital of France?" || !baseKey.SemanticEligible() {
		t.Fatalf("base query = %q, eligible %v", baseKey.Query, baseKey.SemanticEligible())
	}
	cases := map[string]string{
		"instructions":         `{"model":"gpt-test","instructions":"Answer in French.","input":"What is the capital of France?"}`,
		"previous_response_id": `{"model":"gpt-test","previous_response_id":"resp_A","input":"What is the capital of France?"}`,
		"other previous id":    `{"model":"gpt-test","previous_response_id":"resp_B","input":"What is the capital of France?"}`,
		"earlier input item": `{"model":"gpt-test","input":[{"role":"user","content":"Talk like a pirate."},{"role":"assistant","content":"Arr."},` +
			`{"role":"user","content":"What is the capital of France?"}]}`,
		"developer item":  `{"model":"gpt-test","input":[{"role":"developer","content":"Be terse."},{"role":"user","content":"What is the capital of France?"}]}`,
		"tools":           `{"model":"gpt-test","tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}}],"input":"What is the capital of France?"}`,
		"tool_choice":     `{"model":"gpt-test","tool_choice":"required","input":"What is the capital of France?"}`,
		"text.format":     `{"model":"gpt-test","text":{"format":{"type":"json_object"}},"input":"What is the capital of France?"}`,
		"reasoning":       `{"model":"gpt-test","reasoning":{"effort":"high"},"input":"What is the capital of France?"}`,
		"reasoning other": `{"model":"gpt-test","reasoning":{"effort":"low"},"input":"What is the capital of France?"}`,
		"store false":     `{"model":"gpt-test","store":false,"input":"What is the capital of France?"}`,
		"include":         `{"model":"gpt-test","include":["reasoning.encrypted_content"],"input":"What is the capital of France?"}`,
		"max tokens":      `{"model":"gpt-test","max_output_tokens":5,"input":"What is the capital of France?"}`,
		"prompt":          `{"model":"gpt-test","prompt":{"id":"pmpt_1","version":"2"},"input":"What is the capital of France?"}`,
		"other model":     `{"model":"gpt-other","input":"What is the capital of France?"}`,
	}
	seenFP := map[string]string{baseKey.Fingerprint: "base"}
	for name, body := range cases {
		k := responsesKey(t, body)
		if k.Exact == baseKey.Exact {
			t.Errorf("%s: same exact key as the base request", name)
		}
		if other, dup := seenFP[k.Fingerprint]; dup {
			t.Errorf("%s: same fingerprint as %s", name, other)
		}
		seenFP[k.Fingerprint] = name
		if k.Query != baseKey.Query {
			t.Errorf("%s: query %q, want the question text", name, k.Query)
		}
	}
}

// A string input, an easy message and a typed message with input_text parts
// ask the same question in the same context: one fingerprint, one query.
// Fields that do not shape the answer, whitespace and key order change
// nothing; store's default is written out.
func TestResponsesKeySameContext(t *testing.T) {
	forms := []string{
		`{"model":"gpt-test","input":"Hello there"}`,
		`{"model":"gpt-test","input":[{"role":"user","content":"Hello there"}]}`,
		`{"model":"gpt-test","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello there"}]}]}`,
	}
	first := responsesKey(t, forms[0])
	for _, f := range forms[1:] {
		k := responsesKey(t, f)
		if k.Fingerprint != first.Fingerprint || k.Query != first.Query {
			t.Errorf("%s: fingerprint/query differ from the string form (%q vs %q)", f, k.Query, first.Query)
		}
	}
	same := []string{
		`{ "input" : "Hello there" , "model" : "gpt-test" }`,
		`{"model":"gpt-test","input":"Hello there","stream":true,"stream_options":{"include_obfuscation":false}}`,
		`{"model":"gpt-test","input":"Hello there","user":"u1","metadata":{"trace":"x"},"safety_identifier":"s","prompt_cache_key":"k","service_tier":"auto"}`,
		`{"model":"gpt-test","input":"Hello there","store":true}`,
		`{"model":"gpt-test","input":"Hello there","background":false}`,
	}
	for _, s := range same {
		if k := responsesKey(t, s); k.Exact != first.Exact {
			t.Errorf("%s: exact key differs from %s", s, forms[0])
		}
	}
	if k := responsesKey(t, forms[0]); !k.SemanticEligible() {
		t.Error("a text question is not semantic-eligible")
	}
	streamed := responsesKey(t, same[1])
	if !streamed.Stream {
		t.Error("stream: true not reported")
	}
}

// Two models never share an entry, not even semantically: a response id
// only works at the provider that issued it.
func TestResponsesKeyNoGroup(t *testing.T) {
	a, err := ResponsesKey("p1", []byte(`{"model":"gpt-a","input":"hi there"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ResponsesKey("p1", []byte(`{"model":"gpt-b","input":"hi there"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint == b.Fingerprint || a.Exact == b.Exact {
		t.Error("two models share a key")
	}
}

func TestResponsesKeyPartition(t *testing.T) {
	body := []byte(`{"model":"gpt-test","input":"hi there"}`)
	a, _ := ResponsesKey("tenant-a", body)
	b, _ := ResponsesKey("tenant-b", body)
	if a.Exact == b.Exact {
		t.Error("two partitions share an exact key")
	}
	if a.Partition != "tenant-a" || b.Partition != "tenant-b" {
		t.Errorf("partitions %q %q", a.Partition, b.Partition)
	}
	// Responses and Chat Completions never share an entry.
	c, err := openai.ChatKey("tenant-a", []byte(`{"model":"gpt-test","messages":[{"role":"user","content":"hi there"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Exact == a.Exact || c.Fingerprint == a.Fingerprint {
		t.Error("a chat request and a responses request share a key")
	}
}

// Only a text-only user message at the end of the input is embedded.
func TestResponsesKeyQuery(t *testing.T) {
	cases := []struct {
		name, body, query string
	}{
		{"parts joined", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`, "a\nb"},
		{"image", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what is this"},{"type":"input_image","image_url":"https://x/y.png"}]}]}`, ""},
		{"file", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1"},{"type":"input_text","text":"summarise"}]}]}`, ""},
		{"tool output last", `{"model":"m","input":[{"role":"user","content":"weather?"},{"type":"function_call","call_id":"c1","name":"w","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`, ""},
		{"assistant last", `{"model":"m","input":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`, ""},
		{"item reference", `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, ""},
		{"user item with id", `{"model":"m","input":[{"type":"message","id":"msg_1","role":"user","content":"hi"}]}`, ""},
		{"empty string", `{"model":"m","input":""}`, ""},
		{"no input", `{"model":"m","prompt":{"id":"pmpt_1"}}`, ""},
	}
	for _, c := range cases {
		k := responsesKey(t, c.body)
		if k.Query != c.query {
			t.Errorf("%s: query %q, want %q", c.name, k.Query, c.query)
		}
		if (c.query != "") != k.SemanticEligible() {
			t.Errorf("%s: semantic eligible = %v", c.name, k.SemanticEligible())
		}
	}
	// A question asked with an image differs from the same text alone.
	img := responsesKey(t, cases[1].body)
	txt := responsesKey(t, `{"model":"m","input":"what is this"}`)
	if img.Exact == txt.Exact || img.Fingerprint == txt.Fingerprint {
		t.Error("an image turn shares a key with its text alone")
	}
}

// Field names are exact: "Instructions" is not the instructions, yet it is
// still part of the key; the model the key reports is the one the upstream
// reads (the lower-case field).
func TestResponsesKeyExactFieldNames(t *testing.T) {
	k := responsesKey(t, `{"Model":"gpt-a","model":"gpt-b","input":"hi"}`)
	if k.Model != "gpt-b" {
		t.Errorf("model = %q, want the exact field's gpt-b", k.Model)
	}
	lower := responsesKey(t, `{"model":"m","instructions":"x","input":"hi"}`)
	upper := responsesKey(t, `{"model":"m","Instructions":"x","input":"hi"}`)
	none := responsesKey(t, `{"model":"m","input":"hi"}`)
	if lower.Exact == upper.Exact || upper.Exact == none.Exact || lower.Fingerprint == upper.Fingerprint {
		t.Error("a differently cased field is merged with another request")
	}
	prev := responsesKey(t, `{"model":"m","previous_response_id":"resp_A","input":"hi"}`)
	prevUpper := responsesKey(t, `{"model":"m","Previous_Response_ID":"resp_A","input":"hi"}`)
	if prev.Exact == prevUpper.Exact {
		t.Error("Previous_Response_ID shares a key with previous_response_id")
	}
}

func TestResponsesKeyBadRequest(t *testing.T) {
	bad := map[string]string{
		"no model":            `{"input":"hi"}`,
		"input number":        `{"model":"m","input":42}`,
		"input item string":   `{"model":"m","input":["hi"]}`,
		"role number":         `{"model":"m","input":[{"role":1,"content":"hi"}]}`,
		"instructions object": `{"model":"m","instructions":{},"input":"hi"}`,
		"previous id number":  `{"model":"m","previous_response_id":7,"input":"hi"}`,
		"store string":        `{"model":"m","store":"yes","input":"hi"}`,
		"stream string":       `{"model":"m","stream":"yes","input":"hi"}`,
		"not an object":       `["model"]`,
	}
	for name, body := range bad {
		_, err := ResponsesKey("p1", []byte(body))
		if !errors.Is(err, cache.ErrBadRequest) {
			t.Errorf("%s: err = %v, want cache.ErrBadRequest", name, err)
		}
	}
}

// BenchmarkResponsesKey: the key of a Responses request next to the
// ChatKey of the same conversation, for the ratio.
func BenchmarkResponsesKey(b *testing.B) {
	body := []byte(`{"model":"gpt-test","instructions":"You are terse.","previous_response_id":"resp_123",` +
		`"input":[{"role":"user","content":[{"type":"input_text","text":"What is the capital of France, and why?"}]}],` +
		`"tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}],` +
		`"text":{"format":{"type":"text"}},"reasoning":{"effort":"low"},"stream":true}`)
	chat := []byte(`{"model":"gpt-test","messages":[{"role":"system","content":"You are terse."},` +
		`{"role":"user","content":[{"type":"text","text":"What is the capital of France, and why?"}]}],` +
		`"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}],` +
		`"response_format":{"type":"text"},"reasoning_effort":"low","stream":true}`)
	b.Run("responses", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ResponsesKey("p1", body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := openai.ChatKey("p1", chat, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
