package wire

import "testing"

func TestTextTokens(t *testing.T) {
	tests := []struct {
		name string
		body string
		skip []string
		want int
	}{
		{"values, not keys", `{"messages":[{"role":"user","content":"abcdefgh"}]}`, nil, 3}, // "user" + "abcdefgh": 12 chars
		{"skipped field", `{"model":"gpt-4o-mini-2024","messages":[{"content":"abcd"}]}`, []string{"model"}, 1},
		{"data url", `{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAAAAAAAAAAAAAA"}},{"text":"abcd"}]}`, nil, 4}, // "image_url" + "abcd": 13 chars
		{"escaped quote", `{"content":"ab\"cd"}`, nil, 2},
		{"numbers do not count", `{"max_tokens":123456789}`, nil, 0},
	}
	for _, tt := range tests {
		if got := TextTokens([]byte(tt.body), tt.skip...); got != tt.want {
			t.Errorf("%s: TextTokens = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestIntField(t *testing.T) {
	body := []byte(`{"max_tokens":100,"max_completion_tokens":300,"n":0}`)
	if got := IntField(body, "max_completion_tokens", "max_tokens"); got != 300 {
		t.Errorf("IntField = %d, want the first named: 300", got)
	}
	if got := IntField(body, "n"); got != 0 {
		t.Errorf("IntField(n) = %d, want 0 for a field at 0", got)
	}
	if got := IntField([]byte(`not json`), "n"); got != 0 {
		t.Errorf("IntField of a bad body = %d, want 0", got)
	}
}
