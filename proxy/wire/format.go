// Package wire is the seam between Breakwater's cached flow (package proxy)
// and the wire APIs it serves: the Format an API implements, the optional
// hooks the flow asks for, the API registration that mounts it, and the
// helpers the APIs share. Each API is one package beneath this one
// (proxy/wire/<api>); the core imports this package only, never an API.
package wire

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// Format is one wire API's cached endpoint: everything the cached flow must
// know about that API's requests, answers, streams and errors. The flow
// itself (lookup, coalescing, the caller, write-back, relay, resumption) is
// the same for every API.
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
	// onto what the client already has; an error (ErrNoResume) when this API
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
	Feed(ev Event, raw []byte, resumed bool) (relay []byte, end bool, err error)
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

// ErrNoResume is returned by Format.Resume when a stream cannot be continued.
var ErrNoResume = errors.New("this answer cannot be resumed")

// Event is one Server-Sent Event as read from an upstream stream.
type Event struct {
	Event string // "" for plain data events; "error" for error events
	Data  []byte // the joined data lines
}

// Done reports whether the event is the "data: [DONE]" end-of-stream marker.
func (e Event) Done() bool { return e.Event == "" && bytes.Equal(e.Data, []byte("[DONE]")) }

// The optional hooks below are asked of a Format (or, for StreamIDer, of
// its StreamAssembler) by type assertion; a Format implements those that
// apply to its API.

// RequestShaper is a Format whose requests are not sent upstream to its
// Endpoint as they came (a model and method carried in the path), or whose
// refusals are read from the body.
type RequestShaper interface {
	// ShapeRequest adjusts the upstream request the flow built.
	ShapeRequest(r *upstream.Request)
	// PathShape is what the path says (model, stream), read when no key is
	// built (the cache is off); "" and false when the path says nothing.
	PathShape() (model string, stream bool)
}

// UpstreamBinder is a Format some of whose requests continue state that one
// provider account holds, so no other upstream may serve them.
type UpstreamBinder interface {
	// BoundToUpstream reports whether body is bound, and the id of the
	// answer it continues ("" when it names none).
	BoundToUpstream(body []byte) (bound bool, previous string)
}

// BodyKeyed is a Format whose key depends on nothing but the partition, its
// endpoint and the body bytes, and whose body carries "model", "stream" and
// "stream_options.include_usage" at its top level: the exact-hit memo may
// map raw bytes to the key, and the cache-off path may scan those fields
// instead of building a key.
type BodyKeyed interface{ BodyKeyed() }

// ResponseIDer is a Format whose answers carry an id the provider keeps and
// a later request may name: the proxy remembers which upstream created it
// (the answer id owners) and binds the later request there.
type ResponseIDer interface {
	// ResponseID is the id an answer body carries ("" for none).
	ResponseID(body []byte) string
}

// StreamIDer is a StreamAssembler that has read its answer's id from the
// stream ("" until then).
type StreamIDer interface {
	ResponseID() string
}

// GenAINamer names a Format's operation and provider as the OpenTelemetry
// GenAI semantic conventions spell them (gen_ai.operation.name,
// gen_ai.provider.name), for spans and metrics.
type GenAINamer interface {
	GenAI() (operation, provider string)
}

// Identified is a Format whose answers carry a top-level "id" and "created"
// that every answer served from the cache gets fresh (a new id with the
// API's prefix, the current time), so each looks like a new answer to the
// client. The core prepares a stored answer once (Identity) and writes a
// hit's stored bytes around fresh values, for a JSON answer in place of
// Fresh; a replayed stream is rendered once with placeholders and patched
// per hit, in place of Replay. Fresh and Replay must give the same bytes.
type Identified interface {
	// FreshIDPrefix is the prefix of a JSON answer's fresh id, from the
	// stored answer's "id" value (raw JSON, quotes included).
	FreshIDPrefix(storedID []byte) string
	// ReplayIDPrefix is the prefix of a replayed stream's fresh id.
	ReplayIDPrefix() string
	// ReplayWith is Replay with the answer's id and created given, for a
	// request that asks (includeUsage) for the usage chunk.
	ReplayWith(w io.Writer, flush func(), stored []byte, id string, created int64, includeUsage bool) error
}

// Judger is a Format that can put the auto judge's question (cache/verify,
// judgeprompt) to its own API's model: a short request, output of a few
// tokens, thinking off where the API allows it. The reply is read with
// AnswerText and parsed strictly by the judge.
type Judger interface {
	// JudgeRequest is the upstream path and body asking model the
	// judge's system instruction and user message.
	JudgeRequest(model, system, user string) (path string, body []byte)
	// JudgeHeaders are the client headers the judge call keeps besides
	// Authorization: the API's own credential header, and what selects the
	// API version or the account. No other:
	// a client's Idempotency-Key must never make the provider take the
	// judge's call for the request itself.
	JudgeHeaders() []string
}
