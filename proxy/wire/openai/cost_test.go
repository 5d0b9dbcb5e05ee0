package openai

import (
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

func TestRequestCost(t *testing.T) {
	f := openAIFormat{endpoint: ChatEndpoint, chat: true}
	text := `"messages":[{"role":"user","content":"abcdefghijklmnop"}]` // "user" + 16 chars: 5 tokens
	tests := []struct {
		name string
		f    openAIFormat
		body string
		want upstream.Cost
	}{
		{"max_completion_tokens first", f, `{"model":"gpt-4o",` + text + `,"max_tokens":10,"max_completion_tokens":20}`, upstream.Cost{Input: 5, Output: 20}},
		{"max_tokens, per choice", f, `{"model":"gpt-4o",` + text + `,"max_tokens":10,"n":3}`, upstream.Cost{Input: 5, Output: 30}},
		{"no reservation", f, `{"model":"gpt-4o",` + text + `}`, upstream.Cost{Input: 5}},
		{"embeddings: no output", openAIFormat{endpoint: "/v1/embeddings", embeddings: true}, `{"model":"text-embedding-3-small","input":"abcdefgh"}`, upstream.Cost{Input: 2, Output: -1}},
	}
	for _, tt := range tests {
		if got := tt.f.requestCost([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: RequestCost = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestFormatsCarryTheirCost: every OpenAI endpoint's Format estimates its
// requests' cost (the flow reads Format.Cost).
func TestFormatsCarryTheirCost(t *testing.T) {
	for _, f := range []*wire.Format{chatFormat, completionsFormat, embeddingsFormat} {
		if f.Cost == nil {
			t.Errorf("%s: no Cost", f.Endpoint)
		}
	}
}
