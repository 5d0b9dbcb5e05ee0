package upstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/textproto"
	"strings"
)

// Request is one client request to send upstream.
type Request struct {
	// Method is the HTTP method; "" means POST, or GET when Body is nil.
	Method string
	// Path is the client's request path, optionally with a query, e.g.
	// "/v1/chat/completions"; a leading API version ("/v1", or Gemini's
	// "/v1beta" or "/v1alpha") is replaced by the upstream's BaseURL when
	// that names an API root, and kept when it is a bare host.
	Path string
	// Model is the requested model; it selects the route. "" goes to the default upstream.
	Model string
	// Upstream names the upstream for a model no route lists (the wire API's
	// own provider: Anthropic's Messages, Gemini's generateContent); "" or an
	// unknown name means the default upstream.
	Upstream string
	// Body is the JSON request. Its "model" field is rewritten, once per target,
	// when the target's model differs; every attempt to a target sends the same bytes.
	Body []byte
	// Header holds the client's headers to forward (Authorization,
	// OpenAI-Organization, …). Hop-by-hop headers, Host, Content-Length,
	// Accept-Encoding and X-Breakwater-* are dropped; Authorization is replaced when
	// the upstream has an APIKey. nil forwards nothing.
	Header http.Header
	// RequestID is sent as X-Request-ID on every attempt and logged on every line.
	RequestID string
	// Class selects the concurrency pool; "" means "default".
	Class string
	// Stream is informational (logs): Open is what makes a call streaming, and the
	// body must ask for a stream itself.
	Stream bool
	// Avoid names a target to try only after every other one (a stream cut
	// by that target is resumed elsewhere first). "" avoids nothing.
	Avoid string
	// ForModel rewrites the request for a target that serves another model
	// than the one requested: it returns the path and body to send (an API
	// may carry the model in the path rather than the body). It is called once
	// per target, so every attempt to a target sends the same bytes. nil
	// rewrites the body's top-level "model" field and keeps Path.
	ForModel func(model string) (path string, body []byte)
	// FinishAbandoned keeps a non-stream attempt going when ctx is cancelled
	// while the upstream works on it: the provider finishes (and bills) a
	// request whether or not anybody reads the answer, so it is read to its
	// end and returned, for the caller's user to cache for the next asker,
	// and its slot is held as long as the model works on it. No further
	// attempt is made. Off, a cancelled ctx cuts the attempt at once.
	FinishAbandoned bool
	// SameUpstream keeps the request on the upstream of its route's first
	// target: that upstream's other targets (other models) remain fallbacks,
	// targets on other upstreams are skipped. For requests that continue
	// state one provider account holds, such as an OpenAI Responses request
	// naming previous_response_id
	// (https://platform.openai.com/docs/guides/conversation-state): another
	// account answers 404 for that id, or, behind a compatible gateway,
	// answers without the context.
	SameUpstream bool
	// BindUpstream names the upstream that holds the state the request
	// continues (the one that created its previous_response_id): the
	// route's targets on that upstream are kept, or, when the route has
	// none there, the request goes to that upstream with the requested
	// model; never to another upstream. "" (or a name the caller does not
	// know) leaves SameUpstream to decide.
	BindUpstream string
	// Classify reads each non-2xx answer of this request's wire format; its
	// verdict is combined with the caller's own reading of the status and
	// headers. nil means status and headers only.
	Classify func(status int, header http.Header, body []byte) Verdict
	// Short marks a call whose answer is a few tokens (the cache's judge,
	// cache/verify): in its lane it goes ahead of full requests (the rank
	// of interactive classes), it is admitted against its own deadline
	// rather than the lane's time per full answer, and its answer teaches
	// the lane no time per answer (a refusal still holds and cuts the lane
	// like any). It counts as an attempt in every other way: a slot, a send
	// token, the pools and the breaker.
	Short bool
	// Cost is what the request costs the provider's token budgets, as its
	// wire API estimates it (proxy/wire/*/cost.go): a lane sends it only
	// when its budgets cover it, and answers at once one that exceeds a
	// budget's limit per minute. Zero: the lane's typical output alone.
	Cost Cost
	// Usage reads the input and output tokens an answer body reports (ok
	// false when it has none), to correct the budgets by what the answer
	// really cost. nil: the estimate stands.
	Usage func(body []byte) (input, output int, ok bool)
	// GenAI describes the request for the attempt spans when tracing is on
	// (Options.TracerProvider); zero otherwise.
	GenAI GenAI
}

func (r *Request) method() string {
	switch {
	case r.Method != "":
		return r.Method
	case r.Body == nil:
		return http.MethodGet
	}
	return http.MethodPost
}

// upstreamURL joins the upstream's API root and the client's path.
func upstreamURL(base, path string) string {
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

// rewriteModel returns body with its top-level "model" string replaced by model,
// leaving every other byte as it was (key order, spacing). It returns body
// unchanged when it is not a JSON object with a "model" field.
// Not cache.DecodeObject: a decode and re-encode would change the bytes the
// client sent (order, spacing, numbers) beyond the one field.
func rewriteModel(body []byte, model string) []byte {
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

func removeHopHeaders(h http.Header) {
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

// outboundHeader builds the headers of every attempt to one upstream.
func outboundHeader(in http.Header, up Upstream, requestID string, hasBody bool) http.Header {
	h := make(http.Header, len(in)+2)
	for k, v := range in {
		k = http.CanonicalHeaderKey(k)
		if strings.HasPrefix(k, "X-Breakwater-") {
			continue
		}
		// The value slices are shared with in, not copied: everything below
		// and the transport replace or delete a key, never write into its
		// slice. Only two spellings of one name (a map built by hand; a
		// server's are canonical) need a fresh slice.
		if prev, ok := h[k]; ok {
			h[k] = append(append(make([]string, 0, len(prev)+len(v)), prev...), v...)
		} else {
			h[k] = v[:len(v):len(v)]
		}
	}
	removeHopHeaders(h)
	// Go's transport asks for gzip and decompresses itself only when we do not
	// choose the encoding: keep the body plain for the cache.
	for _, k := range []string{"Host", "Content-Length", "Accept-Encoding", "X-Request-Id"} {
		h.Del(k)
	}
	if up.APIKey != "" {
		SetAuth(h, up.Auth, up.APIKey)
	}
	if requestID != "" {
		h.Set("X-Request-Id", requestID) // canonical: no allocation to canonicalise
	}
	if hasBody && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return h
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

// credentialHeaders are the headers any client may carry its key in.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"}

// SetAuth replaces whatever credential h carries with key, sent in style
// (AuthBearer when ""), so a client's own key never reaches an upstream that
// holds its own.
func SetAuth(h http.Header, style, key string) {
	for _, k := range credentialHeaders {
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

// inboundHeader cleans an upstream response's headers for the proxy: hop-by-hop
// headers go, and Content-Length goes because the proxy writes its own.
func inboundHeader(h http.Header) http.Header {
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	removeHopHeaders(h)
	h.Del("Content-Length")
	return h
}
