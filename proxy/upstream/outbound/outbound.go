// Package outbound is the HTTP shape of one upstream exchange: the URL a
// client's path is sent to, the body with its model replaced, the
// credential an upstream holding its own key sends, and the hop-by-hop
// headers dropped both ways (RFC 9110 §7.6.1).
package outbound

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/textproto"
	"strings"
)

// URL joins the upstream's API root and the client's path.
func URL(base, path string) string {
	base = strings.TrimSuffix(base, "/")
	if rest, ok := CutAPIVersion(path); ok && HasAPIRoot(base) {
		path = rest
	}
	if path != "" && path[0] != '/' && path[0] != '?' {
		path = "/" + path
	}
	return base + path
}

// apiVersions are the version segments a client's path may start with:
// "/v1" (OpenAI, Anthropic, Gemini's stable API) and Gemini's "/v1beta" and
// "/v1alpha" (https://ai.google.dev/gemini-api/docs/api-versions).
var apiVersions = [...]string{"/v1beta", "/v1alpha", "/v1"}

// CutAPIVersion returns path without its leading API version segment, and
// whether it had one.
func CutAPIVersion(path string) (string, bool) {
	for _, v := range apiVersions {
		if rest, ok := strings.CutPrefix(path, v); ok && (rest == "" || rest[0] == '/' || rest[0] == '?') {
			return rest, true
		}
	}
	return path, false
}

// HasAPIRoot reports whether a base URL names an API root below its host
// ("https://api.openai.com/v1"), which replaces the client's "/v1". A base
// URL of a bare host ("http://127.0.0.1:9999", as the Anthropic and Gemini
// SDKs take theirs) gets the client's path whole, version included.
func HasAPIRoot(base string) bool {
	rest := base
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	i := strings.IndexByte(rest, '/')
	return i >= 0 && strings.Trim(rest[i:], "/") != ""
}

// RewriteModel returns body with its top-level "model" string replaced by model,
// leaving every other byte as it was (key order, spacing). It returns body
// unchanged when it is not a JSON object with a "model" field.
// Not cache.DecodeObject: a decode and re-encode would change the bytes the
// client sent (order, spacing, numbers) beyond the one field.
func RewriteModel(body []byte, model string) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return body
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return body
		}
		keyEnd := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return body
		}
		if key, _ := tok.(string); key != "model" {
			continue
		}
		end := int(dec.InputOffset())
		start := keyEnd
		for start < end && (body[start] == ':' || body[start] == ' ' || body[start] == '\t' || body[start] == '\n' || body[start] == '\r') {
			start++
		}
		val, err := json.Marshal(model)
		if err != nil {
			return body
		}
		out := make([]byte, 0, len(body)-(end-start)+len(val))
		out = append(out, body[:start]...)
		out = append(out, val...)
		return append(out, body[end:]...)
	}
	return body
}

// hopHeaders are connection-scoped and never forwarded (RFC 9110 §7.6.1, as
// httputil.ReverseProxy).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// RemoveHopHeaders deletes the hop-by-hop headers of h, and those its
// Connection header names.
func RemoveHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// Auth styles: how an upstream that holds its own key sends it.
const (
	// AuthBearer sends "Authorization: Bearer <key>" (OpenAI and compatible
	// servers; Anthropic accepts it too).
	AuthBearer = "bearer"
	// AuthXAPIKey sends "x-api-key: <key>" (Anthropic's documented header).
	AuthXAPIKey = "x-api-key"
	// AuthXGoogAPIKey sends "x-goog-api-key: <key>" (the Gemini API).
	AuthXGoogAPIKey = "x-goog-api-key"
	// DefaultAuth is the style of an upstream that names none.
	DefaultAuth = AuthBearer
)

// CredentialHeaders are the headers any client may carry its key in.
var CredentialHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"}

// SetAuth replaces whatever credential h carries with key, sent in style
// (AuthBearer when ""), so a client's own key never reaches an upstream that
// holds its own.
func SetAuth(h http.Header, style, key string) {
	for _, k := range CredentialHeaders {
		h.Del(k)
	}
	switch style {
	case AuthXAPIKey:
		h.Set("X-Api-Key", key)
	case AuthXGoogAPIKey:
		h.Set("X-Goog-Api-Key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
}

// Inbound cleans an upstream response's headers for the proxy: hop-by-hop
// headers go, and Content-Length goes because the proxy writes its own.
func Inbound(h http.Header) http.Header {
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	RemoveHopHeaders(h)
	h.Del("Content-Length")
	return h
}
