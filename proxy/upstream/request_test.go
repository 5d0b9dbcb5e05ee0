package upstream

import (
	"net/http"
	"testing"
)

func TestOutboundHeader(t *testing.T) {
	in := http.Header{
		"Authorization":       {"Bearer client"},
		"Openai-Organization": {"org-1"},
		"Connection":          {"keep-alive, X-Hop"},
		"X-Hop":               {"1"},
		"Keep-Alive":          {"timeout=5"},
		"Accept-Encoding":     {"br"},
		"X-Breakwater-Class":  {"batch"},
		"X-Request-Id":        {"client-supplied"},
		"Content-Length":      {"12"},
		"Proxy-Authorization": {"secret"},
		"Transfer-Encoding":   {"chunked"},
		"Openai-Beta":         {"assistants=v2"},
	}
	tests := []struct {
		name   string
		apiKey string
		auth   string
	}{
		{"forwards the client's key", "", "Bearer client"},
		{"uses the upstream's key", "sk-up", "Bearer sk-up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := outboundHeader(in, Upstream{APIKey: tt.apiKey}, "req-1", true)
			if got, want := h.Get("Authorization"), tt.auth; got != want {
				t.Errorf("Authorization = %q, want %q", got, want)
			}
			if got, want := h.Get("X-Request-ID"), "req-1"; got != want {
				t.Errorf("X-Request-ID = %q, want %q", got, want)
			}
			for _, k := range []string{"Openai-Organization", "Openai-Beta"} {
				if h.Get(k) == "" {
					t.Errorf("%s dropped, want forwarded", k)
				}
			}
			for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Accept-Encoding", "X-Breakwater-Class", "Content-Length", "Proxy-Authorization", "Transfer-Encoding"} {
				if v := h.Get(k); v != "" {
					t.Errorf("%s = %q forwarded, want dropped", k, v)
				}
			}
			if got, want := h.Get("Content-Type"), "application/json"; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
		})
	}
	if got, want := in.Get("Authorization"), "Bearer client"; got != want {
		t.Errorf("input header modified: Authorization = %q", got)
	}
}
