package outbound

import "testing"

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
			if got, want := string(RewriteModel([]byte(tt.body), tt.model)), tt.want; got != want {
				t.Errorf("RewriteModel = %s, want %s", got, want)
			}
		})
	}
}

func TestURL(t *testing.T) {
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
			if got, want := URL(tt.base, tt.path), tt.want; got != want {
				t.Errorf("URL(%q, %q) = %q, want %q", tt.base, tt.path, got, want)
			}
		})
	}
}
