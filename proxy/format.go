package proxy

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// Format is one wire API's cached endpoint (wire.Format).
type Format = wire.Format

// StreamAssembler follows one stream of a Format (wire.StreamAssembler).
type StreamAssembler = wire.StreamAssembler

// errNoResume is returned by Format.Resume when a stream cannot be continued.
var errNoResume = wire.ErrNoResume

const formatCtxKey = "breakwater.format"

// serveFormat is the handler of a route served by f through the cached flow.
func (s *Server) serveFormat(f Format) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(formatCtxKey, f)
		return s.serveCached(c, f)
	}
}

// formatOf is the Format of the route serving c; Chat Completions' for
// routes that have none (errors of the router itself, pass-through), unless
// the request is an Anthropic one.
func formatOf(c echo.Context) Format {
	if f, ok := c.Get(formatCtxKey).(Format); ok {
		return f
	}
	return passthroughFormat(c.Request().Header)
}

// passthroughFormat is the Format whose errors a request outside the cached
// routes gets: Anthropic's for a request carrying anthropic-version (every
// Anthropic SDK sends it), Google's for a Gemini client, OpenAI's otherwise.
func passthroughFormat(h http.Header) Format {
	if h.Get(headerAnthropicVersion) != "" {
		return messagesFormat
	}
	if h.Get("X-Goog-Api-Client") != "" || h.Get("X-Goog-Api-Key") != "" {
		// The genai SDKs send x-goog-api-client on every request.
		return geminiErrors
	}
	return chatFormat
}

// requestShaper is a Format whose requests are not sent upstream to its
// Endpoint as they came: Gemini's carry the model and method in the path,
// and its refusals are read from the body.
type requestShaper interface {
	shapeRequest(r *upstream.Request)
	// pathShape sets what the path says (model, stream) when no key is
	// built (the cache is off).
	pathShape(sh *requestShape)
}

// upstreamBinder is a Format some of whose requests continue state that one
// provider account holds, so no other upstream may serve them.
type upstreamBinder interface {
	// boundToUpstream reports whether body is bound, and the id of the
	// response it continues ("" when it names none).
	boundToUpstream(body []byte) (bound bool, previous string)
}

// shapeRequest lets f adjust the upstream request r built by the flow, and
// sends a model no route lists to f's own provider.
func (s *Server) shapeRequest(f Format, r *upstream.Request) {
	r.Upstream = s.unlistedUpstream(f)
	if sh, ok := f.(requestShaper); ok {
		sh.shapeRequest(r)
	}
	if b, ok := f.(upstreamBinder); ok {
		if bound, prev := b.boundToUpstream(r.Body); bound {
			r.SameUpstream = true
			// The upstream that created the previous response, when this
			// process or (Options.SharedOwners) another replica saw it:
			// only that account knows the id.
			r.BindUpstream, _ = s.lookupOwner(r.Header, prev)
		}
	}
}

// unlistedUpstream is where f's requests for a model no route lists go.
func (s *Server) unlistedUpstream(f Format) string {
	switch f.Endpoint() {
	case cache.MessagesEndpoint:
		return s.opts.AnthropicUpstream
	case cache.GeminiEndpoint:
		return s.opts.GeminiUpstream
	}
	return ""
}
