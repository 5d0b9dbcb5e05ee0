package upstream

import (
	"net/http"
	"testing"
	"time"
)

func TestClassifyAnswer(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   bool
	}{
		{"429", 429, nil, `{}`, true},
		{"529 anthropic", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, true},
		{"503 openai overloaded", 503, nil, `{"error":{"message":"The engine is currently overloaded, please try again later"}}`, true},
		{"503 with Retry-After", 503, http.Header{"Retry-After": {"2"}}, `upstream busy`, true},
		{"503 bare", 503, nil, `no healthy upstream`, false},
		{"500 gemini unavailable", 500, nil, `{"error":{"code":503,"status":"UNAVAILABLE"}}`, true},
		{"400 gemini exhausted", 400, nil, `{"error":{"status":"RESOURCE_EXHAUSTED"}}`, true},
		{"500", 500, nil, `{"error":{"message":"internal"}}`, false},
		{"502", 502, nil, `bad gateway`, false},
		{"404", 404, nil, `{"error":{"message":"not found"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			if got := classifyAnswer(tt.status, h, []byte(tt.body), nil).Congestion; got != tt.want {
				t.Errorf("congestion = %v, want %v", got, tt.want)
			}
		})
	}
	v := classifyAnswer(500, http.Header{}, []byte(`x`), func(int, http.Header, []byte) Verdict {
		return Verdict{Congestion: true, RetryAfter: time.Second, Reason: "quota"}
	})
	if !v.Congestion || v.RetryAfter != time.Second || v.Reason != "quota" {
		t.Errorf("verdict = %+v, want the hook's", v)
	}
}

func TestShouldRetry(t *testing.T) {
	for _, tt := range []struct {
		header string
		in     bool
		want   bool
	}{{"", true, true}, {"", false, false}, {"false", true, false}, {"true", false, true}, {"TRUE", false, true}} {
		h := http.Header{}
		if tt.header != "" {
			h.Set("x-should-retry", tt.header)
		}
		if got := shouldRetry(h, tt.in); got != tt.want {
			t.Errorf("shouldRetry(%q, %v) = %v, want %v", tt.header, tt.in, got, tt.want)
		}
	}
}
