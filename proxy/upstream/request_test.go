package upstream

import (
	"net/http"
	"testing"
)

func TestRewriteModel(t *testing.T) {
	tests := []struct {
		name, body, model, want string
	}{
		{"rewrites the top-level model only",
			`{"messages":[{"role":"user","content":"x","model":"keep"}], "model" : "gpt-4o" ,"n":1}`, "gpt-4o-mini",
			`{"messages":[{"role":"user","content":"x","model":"keep"}], "model" : "gpt-4o-mini" ,"n":1}`},
		{"first field", `{"model":"a","stream":true}`, "b", `{"model":"b","stream":true}`},
		{"escapes the new name", `{"model":"a"}`, `we"ird`, `{"model":"we\"ird"}`},
		{"no model field", `{"messages":[]}`, "b", `{"messages":[]}`},
		{"not an object", `[1,2]`, "b", `[1,2]`},
		{"invalid JSON", `{"model":`, "b", `{"model":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := string(rewriteModel([]byte(tt.body), tt.model)), tt.want; got != want {
				t.Errorf("rewriteModel = %s, want %s", got, want)
			}
		})
	}
}

func TestUpstreamURL(t *testing.T) {
	tests := []struct{ base, path, want string }{
		{"https://api.openai.com/v1", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"},
		{"https://api.openai.com/v1/", "/v1/models", "https://api.openai.com/v1/models"},
		{"http://h:8080/openai/v1", "/v1/embeddings?x=1", "http://h:8080/openai/v1/embeddings?x=1"},
		{"http://h/v1", "/v1", "http://h/v1"},
		// Gemini's versions are replaced by the root's version like "/v1" ...
		{"https://generativelanguage.googleapis.com/v1beta", "/v1beta/models/m:generateContent", "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent"},
		{"http://h/v1", "/v1alpha/x?y=1", "http://h/v1/x?y=1"},
		// ... a segment that only starts like one is not a version ...
		{"http://h/v1", "/v1betax", "http://h/v1/v1betax"},
		// ... and a bare host keeps the version the client called.
		{"https://generativelanguage.googleapis.com", "/v1beta/models/m:generateContent", "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent"},
		{"https://generativelanguage.googleapis.com/", "/v1/models/m:generateContent", "https://generativelanguage.googleapis.com/v1/models/m:generateContent"},
		// A bare host takes the client's path whole, as the Anthropic SDK's
		// base URL does.
		{"http://h:9999", "/v1/messages", "http://h:9999/v1/messages"},
		{"http://h:9999/", "/v1/chat/completions?x=1", "http://h:9999/v1/chat/completions?x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got, want := upstreamURL(tt.base, tt.path), tt.want; got != want {
				t.Errorf("upstreamURL(%q, %q) = %q, want %q", tt.base, tt.path, got, want)
			}
		})
	}
}

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
