package proxy

import (
	"strings"
	"testing"
)

func TestUsageReaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Format
		body string
		want Usage
	}{
		{"chat", chatFormat, `{"id":"x","usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"completion_tokens_details":{"reasoning_tokens":3}}}`, Usage{Input: 12, Output: 7, Known: true}},
		{"chat without usage", chatFormat, `{"id":"x","choices":[]}`, Usage{}},
		{"chat null usage", chatFormat, `{"usage":null}`, Usage{}},
		{"embeddings", embeddingsFormat, `{"data":[],"usage":{"prompt_tokens":8,"total_tokens":8}}`, Usage{Input: 8, Output: 0, Known: true}},
		{"messages", messagesFormat, `{"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":4,"server_tool_use":{"web_search_requests":1}}}`, Usage{Input: 60, Output: 4, Known: true}},
		{"responses", responsesFormat, `{"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":2},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":14}}`, Usage{Input: 9, Output: 5, Known: true}},
		{"gemini", geminiErrors, `{"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":6,"thoughtsTokenCount":2,"totalTokenCount":12,"promptTokensDetails":[{"modality":"TEXT","tokenCount":4}]}}`, Usage{Input: 4, Output: 8, Known: true}},
		{"not JSON", chatFormat, `data: {"usage":{"prompt_tokens":1}}`, Usage{}},
		{"negative count", chatFormat, `{"usage":{"prompt_tokens":-1,"completion_tokens":2}}`, Usage{Input: 0, Output: 2, Known: true}},
		{"cut body", chatFormat, `{"usage":{"prompt_tokens":1,"completion_tokens":2}`, Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.Usage([]byte(tc.body)); got != tc.want {
				t.Errorf("Usage(%s) = %+v, want %+v", tc.body, got, tc.want)
			}
		})
	}
}

// TestUsageReadDoesNotAllocate: the reader runs on every miss.
func TestUsageReadDoesNotAllocate(t *testing.T) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":16,"completion_tokens":300,"total_tokens":316}}`)
	var u Usage
	if n := testing.AllocsPerRun(100, func() { u = chatFormat.Usage(body) }); n != 0 {
		t.Errorf("Usage allocates %.0f times per call, want 0", n)
	}
	if u != (Usage{Input: 16, Output: 300, Known: true}) {
		t.Errorf("Usage = %+v", u)
	}
}

// BenchmarkUsageRead reads the usage of a 1.4 KB completion (the size of
// the per-request figures in docs/BENCHMARKS.md), as every miss does.
func BenchmarkUsageRead(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-up","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("The answer, in some detail. ", 44) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":16,"completion_tokens":300,"total_tokens":316}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if u := chatFormat.Usage(body); !u.Known {
			b.Fatal("no usage")
		}
	}
}
