package proxy

import "testing"

// Every wire format reads the text a user sees in its own answers, without
// reasoning, thinking or tool calls: the live false-hit estimate compares it.
func TestFormatAnswerText(t *testing.T) {
	tests := []struct {
		name string
		f    Format
		body string
		want string
	}{
		{"chat", chatFormat, `{"choices":[{"message":{"role":"assistant","content":"Paris"}}]}`, "Paris"},
		{"completions", completionsFormat, `{"choices":[{"text":"Paris"}]}`, "Paris"},
		{"messages", messagesFormat, `{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Par"},{"type":"tool_use","id":"t","name":"f","input":{}},{"type":"text","text":"is"}],"stop_reason":"end_turn"}`, "Paris"},
		{"messages, not a message", messagesFormat, `{"choices":[{"message":{"content":"Paris"}}]}`, ""},
		{"responses", responsesFormat, `{"object":"response","output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Par"},{"type":"refusal","refusal":"no"},{"type":"output_text","text":"is"}]},{"type":"function_call","name":"f","arguments":"{}"}]}`, "Paris"},
		{"gemini", geminiErrors, `{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"Par"},{"text":"is"}],"role":"model"}}]}`, "Paris"},
		{"gemini, no candidates", geminiErrors, `{"candidates":[]}`, ""},
		{"not json", chatFormat, `not json`, ""},
	}
	for _, tt := range tests {
		if got := tt.f.AnswerText([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: AnswerText = %q, want %q", tt.name, got, tt.want)
		}
	}
}
