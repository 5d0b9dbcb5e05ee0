package upstream

import (
	"net/http"
	"strings"

	"github.com/breakwater-dev/breakwater/proxy/upstream/outbound"
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
	outbound.RemoveHopHeaders(h)
	// Go's transport asks for gzip and decompresses itself only when we do not
	// choose the encoding: keep the body plain for the cache.
	for _, k := range []string{"Host", "Content-Length", "Accept-Encoding", "X-Request-Id"} {
		h.Del(k)
	}
	if up.APIKey != "" {
		outbound.SetAuth(h, up.Auth, up.APIKey)
	}
	if requestID != "" {
		h.Set("X-Request-Id", requestID) // canonical: no allocation to canonicalise
	}
	if hasBody && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return h
}

// Auth styles: how an upstream that holds its own key sends it (outbound.Auth…).
const (
	AuthBearer      = outbound.AuthBearer
	AuthXAPIKey     = outbound.AuthXAPIKey
	AuthXGoogAPIKey = outbound.AuthXGoogAPIKey
	DefaultAuth     = outbound.DefaultAuth
)

// CutAPIVersion returns path without its leading API version segment, and
// whether it had one (outbound.CutAPIVersion).
func CutAPIVersion(path string) (string, bool) { return outbound.CutAPIVersion(path) }

// HasAPIRoot reports whether a base URL names an API root below its host
// (outbound.HasAPIRoot).
func HasAPIRoot(base string) bool { return outbound.HasAPIRoot(base) }

// SetAuth replaces whatever credential h carries with key, sent in style
// (outbound.SetAuth).
func SetAuth(h http.Header, style, key string) { outbound.SetAuth(h, style, key) }
