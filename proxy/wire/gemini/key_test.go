package gemini

import (
	"errors"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

// geminiBase is a multi-turn generateContent body as the genai SDKs send it.
const geminiBase = `{
  "systemInstruction": {"parts": [{"text": "You are terse."}]},
  "contents": [
    {"role": "user", "parts": [{"text": "Hi"}]},
    {"role": "model", "parts": [{"text": "Hello."}]},
    {"role": "user", "parts": [{"text": "What is the capital of France?"}]}
  ],
  "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
  "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
  "generationConfig": {"temperature": 0.2, "maxOutputTokens": 256, "stopSequences": ["END"],
    "responseMimeType": "text/plain"}
}`

func geminiKey(t *testing.T, model string, body string) wire.Key {
	t.Helper()
	k, err := GeminiKey("p1", model, false, []byte(body), nil)
	if err != nil {
		t.Fatalf("GeminiKey(%s): %v", body, err)
	}
	return k
}

func TestGeminiKeyBasics(t *testing.T) {
	k := geminiKey(t, "gemini-2.5-flash", geminiBase)
	if k.Query != "What is the capital of France?" {
		t.Errorf("Query = %q", k.Query)
	}
	if k.Model != "gemini-2.5-flash" || k.Endpoint != GeminiEndpoint || k.Partition != "p1" {
		t.Errorf("key = %+v", k)
	}
	if k.Temperature == nil || *k.Temperature != 0.2 {
		t.Errorf("Temperature = %v, want 0.2", k.Temperature)
	}
	if !k.SemanticEligible() {
		t.Error("a text-only final user turn must be semantic-eligible")
	}
	// Stream and non-stream share the entry; the partition does not.
	s, err := GeminiKey("p1", "gemini-2.5-flash", true, []byte(geminiBase), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Stream || s.Exact != k.Exact || s.Fingerprint != k.Fingerprint {
		t.Errorf("stream key = %+v, want the non-stream key with Stream", s)
	}
	o, err := GeminiKey("p2", "gemini-2.5-flash", false, []byte(geminiBase), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Exact == k.Exact {
		t.Error("two partitions share an exact key")
	}
	// Formatting does not matter.
	r := geminiKey(t, "gemini-2.5-flash", string(reformat(t, decodeNumbers(t, []byte(geminiBase)))))
	if r.Exact != k.Exact || r.Fingerprint != k.Fingerprint {
		t.Error("the same request formatted differently got another key")
	}
}

// Everything but the final user text is context: changing it changes both
// the exact key and the fingerprint; changing the final text changes only
// the exact key and the query.
func TestGeminiKeyContextCounts(t *testing.T) {
	base := geminiKey(t, "gemini-2.5-flash", geminiBase)
	context := []struct{ name, old, new string }{
		{"systemInstruction", `"You are terse."`, `"You are verbose."`},
		{"earlier turn", `"Hello."`, `"Bonjour."`},
		{"tools", `"lookup"`, `"search"`},
		{"toolConfig", `"AUTO"`, `"ANY"`},
		{"temperature", `"temperature": 0.2`, `"temperature": 0.3`},
		{"maxOutputTokens", `256`, `257`},
		{"stopSequences", `["END"]`, `["STOP"]`},
		{"responseMimeType", `"text/plain"`, `"application/json", "responseSchema": {"type": "OBJECT"}`},
		{"final turn role", `{"role": "user", "parts": [{"text": "What`, `{"parts": [{"text": "What`},
	}
	for _, c := range context {
		body := strings.Replace(geminiBase, c.old, c.new, 1)
		if body == geminiBase {
			t.Fatalf("%s: replacement did not apply", c.name)
		}
		k := geminiKey(t, "gemini-2.5-flash", body)
		if k.Exact == base.Exact || k.Fingerprint == base.Fingerprint {
			t.Errorf("%s: exact changed %v, fingerprint changed %v; want both", c.name, k.Exact != base.Exact, k.Fingerprint != base.Fingerprint)
		}
	}
	schemaA := strings.Replace(geminiBase, `"text/plain"`, `"application/json", "responseSchema": {"type": "OBJECT"}`, 1)
	schemaB := strings.Replace(geminiBase, `"text/plain"`, `"application/json", "responseSchema": {"type": "ARRAY"}`, 1)
	if a, b := geminiKey(t, "m", schemaA), geminiKey(t, "m", schemaB); a.Fingerprint == b.Fingerprint {
		t.Error("responseSchema is not part of the fingerprint")
	}
	if k := geminiKey(t, "gemini-3-pro-preview", geminiBase); k.Exact == base.Exact || k.Fingerprint == base.Fingerprint {
		t.Error("the model in the path is not part of the key")
	}
	q := geminiKey(t, "gemini-2.5-flash", strings.Replace(geminiBase, "capital of France", "capital of Spain", 1))
	if q.Exact == base.Exact || q.Fingerprint != base.Fingerprint || q.Query == base.Query {
		t.Errorf("final text changed: exact changed %v (want true), fingerprint same %v (want true)", q.Exact != base.Exact, q.Fingerprint == base.Fingerprint)
	}
	// labels are billing metadata.
	l := geminiKey(t, "gemini-2.5-flash", strings.Replace(geminiBase, `"tools"`, `"labels": {"team": "a"}, "tools"`, 1))
	if l.Exact != base.Exact {
		t.Error("labels changed the key")
	}
	// A cache group lets two models share the fingerprint, not the exact key.
	group := func(string) string { return "gemini" }
	a, _ := GeminiKey("p1", "gemini-2.5-flash", false, []byte(geminiBase), group)
	b, _ := GeminiKey("p1", "gemini-2.5-pro", false, []byte(geminiBase), group)
	if a.Fingerprint != b.Fingerprint || a.Exact == b.Exact {
		t.Error("a cache group must share the fingerprint and keep exact keys apart")
	}
}

// A final turn with anything but text parts is answered from the exact tier
// only.
func TestGeminiKeyFinalTurnNotText(t *testing.T) {
	last := `{"role": "user", "parts": [{"text": "What is the capital of France?"}]}`
	cases := map[string]string{
		"inlineData":       `{"role": "user", "parts": [{"text": "What is this?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]}`,
		"inline_data":      `{"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}, {"text": "What is this?"}]}`,
		"fileData":         `{"role": "user", "parts": [{"fileData": {"mimeType": "application/pdf", "fileUri": "https://x/files/abc"}}, {"text": "Summarise"}]}`,
		"functionResponse": `{"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {"v": 1}}}]}`,
		"model last":       `{"role": "model", "parts": [{"text": "The capital is"}]}`,
		"no parts":         `{"role": "user"}`,
		"text with extras": `{"role": "user", "parts": [{"text": "What is the capital of France?", "thought": true}]}`,
	}
	for name, turn := range cases {
		body := strings.Replace(geminiBase, last, turn, 1)
		if body == geminiBase {
			t.Fatalf("%s: replacement did not apply", name)
		}
		k := geminiKey(t, "gemini-2.5-flash", body)
		if k.Query != "" || k.SemanticEligible() {
			t.Errorf("%s: Query = %q, want exact tier only", name, k.Query)
		}
		if k.Exact == "" || k.Fingerprint == "" {
			t.Errorf("%s: key = %+v, want exact key and fingerprint", name, k)
		}
	}
	// Two text parts are embedded together.
	k := geminiKey(t, "m", strings.Replace(geminiBase, last, `{"role": "user", "parts": [{"text": "Line one"}, {"text": "line two"}]}`, 1))
	if k.Query != "Line one\nline two" {
		t.Errorf("Query = %q", k.Query)
	}
}

// Field names match exactly: encoding/json's case-insensitive matching
// would read "Contents" where the API reads "contents".
func TestGeminiKeyExactFieldNames(t *testing.T) {
	body := `{"contents": [{"role": "user", "parts": [{"text": "What is 2+2?"}]}],
	          "Contents": [{"role": "user", "parts": [{"text": "How do I delete my account?"}]}]}`
	k := geminiKey(t, "m", body)
	if k.Query != "What is 2+2?" {
		t.Errorf("Query = %q, want the text of \"contents\"", k.Query)
	}
	other := geminiKey(t, "m", `{"contents": [{"role": "user", "parts": [{"text": "What is 2+2?"}]}],
	          "Contents": [{"role": "user", "parts": [{"text": "Something else"}]}]}`)
	if other.Exact == k.Exact {
		t.Error("an unknown field does not count in the exact key")
	}
	if _, err := GeminiKey("p", "m", false, []byte(`{"Contents": [{"parts": [{"text": "hi"}]}]}`), nil); !errors.Is(err, cache.ErrBadRequest) {
		t.Errorf("only \"Contents\": err = %v, want cache.ErrBadRequest", err)
	}
	// Both spellings of generationConfig count, the higher temperature wins.
	k = geminiKey(t, "m", `{"contents": [{"parts": [{"text": "hi"}]}], "generation_config": {"temperature": 1.5}, "generationConfig": {"temperature": 0}}`)
	if k.Temperature == nil || *k.Temperature != 1.5 {
		t.Errorf("Temperature = %v, want 1.5", k.Temperature)
	}
	if k := geminiKey(t, "m", `{"contents": [{"parts": [{"text": "hi"}]}]}`); k.Temperature != nil {
		t.Errorf("Temperature = %v, want nil when unset", *k.Temperature)
	}
}

func TestGeminiKeyBadRequests(t *testing.T) {
	cases := map[string]string{
		"no contents":     `{"generationConfig": {}}`,
		"empty contents":  `{"contents": []}`,
		"content string":  `{"contents": ["hi"]}`,
		"parts object":    `{"contents": [{"parts": {"text": "hi"}}]}`,
		"role number":     `{"contents": [{"role": 1, "parts": []}]}`,
		"temperature str": `{"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"temperature": "0.5"}}`,
		"config array":    `{"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": []}`,
		"not an object":   `[1]`,
	}
	for name, body := range cases {
		if _, err := GeminiKey("p", "m", false, []byte(body), nil); !errors.Is(err, cache.ErrBadRequest) {
			t.Errorf("%s: err = %v, want cache.ErrBadRequest", name, err)
		}
	}
	if _, err := GeminiKey("p", "", false, []byte(geminiBase), nil); !errors.Is(err, cache.ErrBadRequest) {
		t.Errorf("no model: err = %v, want cache.ErrBadRequest", err)
	}
}

// BenchmarkGeminiKey: the key of a multi-turn generateContent request next
// to ChatKey on the same conversation in Chat Completions form.
func BenchmarkGeminiKey(b *testing.B) {
	chat := []byte(`{"model":"gemini-2.5-flash","temperature":0.2,"max_tokens":256,"stop":["END"],
	  "messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi"},
	  {"role":"assistant","content":"Hello."},{"role":"user","content":"What is the capital of France?"}],
	  "tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],"tool_choice":"auto"}`)
	b.Run("gemini", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := GeminiKey("p", "gemini-2.5-flash", false, []byte(geminiBase), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := openai.ChatKey("p", chat, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
