package proxy

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// Format is one wire API (OpenAI Chat Completions, Anthropic Messages, ...):
// everything the cached flow must know about that API's requests, answers,
// streams and errors. The flow itself (lookup, coalescing, the caller,
// write-back, relay, resumption) is the same for every API; adding an API is
// one Format implementation plus a route (see docs/ARCHITECTURE.md).
type Format interface {
	// Endpoint is the API path, as hashed into the key and used as the
	// endpoint label in logs, stats and metrics (e.g. "/v1/chat/completions").
	Endpoint() string
	// Key parses and validates a request: exact key, context fingerprint
	// and the text the semantic tier embeds (Query; "" = exact tier only).
	// An error wrapping cache.ErrBadRequest is answered 400.
	Key(partition string, h http.Header, body []byte, group func(model string) string) (cache.Key, error)
	// Semantic reports whether the semantic tier may answer this API at all.
	Semantic() bool
	// Finished reports whether a non-stream answer body is a finished,
	// storable answer (never an error, a refusal or a cut answer).
	Finished(body []byte) bool
	// Fresh returns a stored body as it is served to a new JSON request.
	Fresh(body []byte, now time.Time) []byte
	// Usage is the token usage an answer body reports, in the API's own
	// shape (a streamed answer is read from its assembled body, which keeps
	// the usage the stream's events carried). Read without decoding: it
	// runs on every miss.
	Usage(body []byte) Usage
	// AnswerText is the text a user reads in an answer body (no reasoning
	// or thinking, no tool calls): what the live false-hit estimate compares
	// between a cached answer and a fresh one. "" when there is none.
	AnswerText(body []byte) string
	// Replay writes a stored answer as a complete, valid event stream for a
	// request whose body is req, calling flush after each event.
	Replay(w io.Writer, flush func(), stored, req []byte, now time.Time) error
	// NewAssembler returns the assembler of one upstream stream.
	NewAssembler() StreamAssembler
	// Resume builds the body asking the next target to continue a stream
	// cut after asm's events, and readies asm to splice that continuation
	// onto what the client already has; an error (errNoResume) when this API
	// or this answer cannot be resumed.
	Resume(body []byte, asm StreamAssembler) ([]byte, error)
	// ForModel returns the upstream.Request.ForModel hook for a request with
	// this body: how to rewrite it for a target serving another model. nil
	// keeps the caller's default (the body's "model" field is rewritten).
	ForModel(path string, body []byte) func(model string) (string, []byte)
	// Error renders an error in the API's own shape: the status to send
	// (an API may answer a condition with its own status, as Anthropic
	// answers overload with 529) and the body.
	Error(status int, code, message string) (int, []byte)
	// StreamError is the event ending a stream that was cut and could not
	// be resumed, in the form the API's SDKs raise as an error.
	StreamError(err error) []byte
}

// StreamAssembler follows one stream of a Format as it is relayed,
// rebuilding the answer so a streamed miss can be stored.
type StreamAssembler interface {
	// Feed takes one upstream event (raw: its bytes as received). It returns
	// the bytes to relay to the client (nil drops the event), whether the
	// event ends the stream cleanly, or why the stream counts as cut.
	// resumed is true for the events of a continuation on another target:
	// the assembler drops what the client already has (a second preamble).
	Feed(ev sseEvent, raw []byte, resumed bool) (relay []byte, end bool, err error)
	// FinishedAtEOF reports whether a stream that closed without its end
	// marker nevertheless finished.
	FinishedAtEOF() bool
	// Partial is the text generated so far (what a resumed stream continues).
	Partial() string
	// Trailer is what to send after a clean end the upstream did not mark
	// itself (e.g. "data: [DONE]"); nil when nothing is missing.
	Trailer() []byte
	// Complete reports whether the stream finished cleanly and is storable.
	Complete() bool
	// Body renders the assembled answer as the API's non-stream body.
	Body() ([]byte, error)
}

// errNoResume is returned by Format.Resume when a stream cannot be continued.
var errNoResume = errors.New("this answer cannot be resumed")

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
