package upstream

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/upstream/outbound"
)

// An API that carries the model in the path (Gemini) rewrites the request
// through ForModel: the fallback target gets the hook's path and body, the
// first target the request as it was.
func TestForModelRewritesPathAndBody(t *testing.T) {
	a := startUpstream(t, always(http.StatusServiceUnavailable))
	b := startUpstream(t, ok)
	c := newCaller(t, twoTargets(a.url(), b.url()))
	req := chat("gpt-4o")
	req.Path = "/v1/models/gpt-4o:generate"
	req.ForModel = func(model string) (string, []byte) {
		return "/v1/models/" + model + ":generate", []byte(`{"for":"` + model + `"}`)
	}
	if _, err := c.Do(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	first, second := a.calls()[0], b.calls()[0]
	if got, want := first.path, "/v1/models/gpt-4o:generate"; got != want {
		t.Errorf("first target path = %q, want %q (same model: no rewrite)", got, want)
	}
	if got, want := second.path, "/v1/models/gpt-4o-mini:generate"; got != want {
		t.Errorf("fallback path = %q, want %q", got, want)
	}
	if got, want := second.body, `{"for":"gpt-4o-mini"}`; got != want {
		t.Errorf("fallback body = %s, want %s", got, want)
	}
}

// An upstream holding its own key sends it in its auth style, and no
// credential header of the client's reaches it.
func TestAuthStyles(t *testing.T) {
	in := http.Header{
		"Authorization":     {"Bearer client"},
		"X-Api-Key":         {"client"},
		"Anthropic-Version": {"2023-06-01"},
	}
	tests := []struct {
		style, header, want string
	}{
		{"", "Authorization", "Bearer sk-up"},
		{AuthBearer, "Authorization", "Bearer sk-up"},
		{AuthXAPIKey, "X-Api-Key", "sk-up"},
		{AuthXGoogAPIKey, "X-Goog-Api-Key", "sk-up"},
	}
	for _, tt := range tests {
		h := outboundHeader(in, Upstream{APIKey: "sk-up", Auth: tt.style}, "", true)
		if got := h.Get(tt.header); got != tt.want {
			t.Errorf("auth %q: %s = %q, want %q", tt.style, tt.header, got, tt.want)
		}
		for _, k := range outbound.CredentialHeaders {
			if k != tt.header && h.Get(k) != "" {
				t.Errorf("auth %q: client's %s = %q forwarded", tt.style, k, h.Get(k))
			}
		}
		if h.Get("Anthropic-Version") == "" {
			t.Errorf("auth %q: anthropic-version dropped", tt.style)
		}
	}
	// Without a key of its own, the client's headers go as sent.
	h := outboundHeader(in, Upstream{Auth: AuthXAPIKey}, "", true)
	if h.Get("X-Api-Key") != "client" || h.Get("Authorization") != "Bearer client" {
		t.Errorf("forwarded headers = %v, want the client's as sent", h)
	}
	if _, err := New(Options{Upstreams: []Upstream{{Name: "a", BaseURL: "http://x", Auth: "basic"}}, DefaultUpstream: "a"}); err == nil || !strings.Contains(err.Error(), "auth") {
		t.Errorf("New with auth basic: err = %v, want a validation error", err)
	}
}
