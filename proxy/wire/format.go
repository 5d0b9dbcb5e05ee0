// Package wire is the seam between Breakwater's cached flow (package proxy)
// and the wire APIs it serves: the Format an API fills in (required
// behaviour, and optional behaviour as function fields where nil is the
// default), the API registration that mounts it, and the helpers the APIs
// share: one SSE writer (sse.go), one error-event message, one resume-body
// builder and one text-delta replayer. Each API is one package beneath this one
// (proxy/wire/<api>); the core imports this package only, never an API.
package wire

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// Format is one wire API's cached endpoint: everything the cached flow must
// know about that API's requests, answers, streams and errors. The flow
// itself (lookup, coalescing, the caller, write-back, relay, resumption) is
// the same for every API.
//
// It is a value of function fields, as net/http/httputil.ReverseProxy is:
// the fields down to StreamError are what every API has and must be set;
// every one after them is optional, and nil (or zero) means the default its
// comment names. No API writes a stub for behaviour it lacks, and the flow
// asks no Format for a hook by type assertion.
type Format struct {
	// Endpoint is the API path, as hashed into the key and used as the
	// endpoint label in logs, stats and metrics (e.g. "/v1/chat/completions").
	Endpoint string
	// Key parses and validates a request: exact key, context fingerprint
	// and the text the semantic tier embeds (Query; "" = exact tier only).
	// An error wrapping cache.ErrBadRequest is answered 400.
	Key func(partition string, h http.Header, body []byte, group func(model string) string) (Key, error)
	// Finished reports whether a non-stream answer body is a finished,
	// storable answer (never an error, a refusal or a cut answer).
	Finished func(body []byte) bool
	// Usage is the token usage an answer body reports, in the API's own
	// shape (a streamed answer is read from its assembled body, which keeps
	// the usage the stream's events carried). Read without decoding: it
	// runs on every miss.
	Usage func(body []byte) Usage
	// AnswerText is the text a user reads in an answer body (no reasoning
	// or thinking, no tool calls): what the live false-hit estimate compares
	// between a cached answer and a fresh one. "" when there is none.
	AnswerText func(body []byte) string
	// Replay writes a stored answer as a complete, valid event stream for a
	// request whose body is req, calling flush after each event.
	Replay func(w io.Writer, flush func(), stored, req []byte, now time.Time) error
	// NewAssembler returns the assembler of one upstream stream.
	NewAssembler func() StreamAssembler
	// Error renders an error in the API's own shape: the status to send
	// (an API may answer a condition with its own status, as Anthropic
	// answers overload with 529) and the body.
	Error func(status int, code, message string) (int, []byte)
	// StreamError is the event ending a stream that was cut and could not
	// be resumed, in the form the API's SDKs raise as an error
	// (InterruptedMessage says why).
	StreamError func(err error) []byte

	// ExactOnly keeps the semantic tier from answering this API (false:
	// both tiers may).
	ExactOnly bool
	// BodyKeyed: the key depends on nothing but the partition, Endpoint and
	// the body bytes, and the body carries "model", "stream" and
	// "stream_options.include_usage" at its top level, so the exact-hit memo
	// may map raw bytes to the key, and the cache-off path may scan those
	// fields instead of building a key. false: the key is always built.
	BodyKeyed bool
	// Resume builds the body asking the next target to continue a stream
	// cut after asm's events, and readies asm to splice that continuation
	// onto what the client already has; an error (ErrNoResume) when this
	// answer cannot be resumed. nil: no stream of this API is resumed.
	Resume func(body []byte, asm StreamAssembler) ([]byte, error)
	// Trailer is what to send after a stream that finished without the end
	// marker its clients wait for (e.g. "data: [DONE]"); nil, or a nil
	// result: nothing.
	Trailer func(asm StreamAssembler) []byte
	// ShapeRequest adjusts the upstream request the flow built (a model and
	// method carried in the path, refusals read from the body, a fallback
	// target's model put in the path: upstream.Request.ForModel). It runs
	// again on a resumed stream's request, whose Body it then holds. nil:
	// sent to Endpoint as it came, a fallback target's model rewritten in
	// the body's "model" field.
	ShapeRequest func(r *upstream.Request)
	// Cost is what a request costs the provider's token budgets before it
	// is sent (proxy/wire/*/cost.go): its input tokens estimated from the
	// body, and the output it reserves (upstream.Request.Cost). nil: no
	// estimate, the lane charges its typical output alone.
	Cost func(body []byte) upstream.Cost
	// PathModel and PathStream are what the request's path says (model,
	// stream), read when no key is built (the cache is off). "": the path
	// says nothing.
	PathModel  string
	PathStream bool
	// BoundToUpstream reports whether a request body continues state that
	// one provider account holds, so no other upstream may serve it, and
	// the id of the answer it continues ("" when it names none). nil: none
	// is.
	BoundToUpstream func(body []byte) (bound bool, previous string)
	// ResponseID is the id an answer body carries that the provider keeps
	// and a later request may name ("" for none): the proxy remembers which
	// upstream created it (the answer id owners) and binds the later
	// request there. nil: this API's answers carry none.
	ResponseID func(body []byte) string
	// StreamResponseID is that id as read so far by a stream's assembler
	// ("" until then). nil: read from the stored body only.
	StreamResponseID func(asm StreamAssembler) string
	// GenAIOperation and GenAIProvider name the API's operation and
	// provider as the OpenTelemetry GenAI semantic conventions spell them
	// (gen_ai.operation.name, gen_ai.provider.name), for spans and metrics.
	// "": "chat" and no provider.
	GenAIOperation, GenAIProvider string
	// FreshIDs: answers get a fresh id and created per hit. nil: a stored
	// answer is served as it was stored.
	FreshIDs *FreshIDs
	// Judge: the auto judge may put its question to this API's model. nil:
	// it may not.
	Judge *Judge
}

// Semantic reports whether the semantic tier may answer f's requests.
func (f *Format) Semantic() bool { return !f.ExactOnly }

// Fresh returns a stored body as it is served to a new JSON request: with a
// fresh id and created when f has FreshIDs, else as stored.
func (f *Format) Fresh(body []byte, now time.Time) []byte {
	if f.FreshIDs == nil {
		return body
	}
	return PrepareIdentity(body, f.FreshIDs.JSONPrefix).AppendTo(make([]byte, 0, len(body)+32), now)
}

// Check reports the first required field f lacks; errorsOnly checks only
// those of an API's error shape (API.Errors).
func (f *Format) Check(errorsOnly bool) error {
	set := []struct {
		name string
		ok   bool
	}{
		{"Error", f.Error != nil}, {"StreamError", f.StreamError != nil},
		{"Endpoint", f.Endpoint != ""}, {"Key", f.Key != nil}, {"Finished", f.Finished != nil},
		{"Usage", f.Usage != nil}, {"AnswerText", f.AnswerText != nil}, {"Replay", f.Replay != nil},
		{"NewAssembler", f.NewAssembler != nil},
	}
	if errorsOnly {
		set = set[:2]
	}
	for _, s := range set {
		if !s.ok {
			return errors.New("the Format has no " + s.name)
		}
	}
	return nil
}

// ReplayStored adapts a replay that reads nothing but the stored answer
// (no request field, no clock) to Format.Replay.
func ReplayStored(replay func(w io.Writer, flush func(), stored []byte) error) func(io.Writer, func(), []byte, []byte, time.Time) error {
	return func(w io.Writer, flush func(), stored, _ []byte, _ time.Time) error { return replay(w, flush, stored) }
}

// FreshIDs is set on a Format whose answers carry a top-level "id" and
// "created" that every answer served from the cache gets fresh (a new id
// with the API's prefix, the current time), so each looks like a new answer
// to the client. The core prepares a stored answer once (Identity) and
// writes a hit's stored bytes around fresh values, for a JSON answer; a
// replayed stream is rendered once with placeholders and patched per hit,
// in place of Replay. Format.Fresh and Replay must give the same bytes.
type FreshIDs struct {
	// JSONPrefix is the prefix of a JSON answer's fresh id, from the
	// stored answer's "id" value (raw JSON, quotes included).
	JSONPrefix func(storedID []byte) string
	// StreamPrefix is the prefix of a replayed stream's fresh id.
	StreamPrefix string
	// ReplayWith is Replay with the answer's id and created given, for a
	// request that asks (includeUsage) for the usage chunk.
	ReplayWith func(w io.Writer, flush func(), stored []byte, id string, created int64, includeUsage bool) error
}

// Judge is set on a Format that can put the auto judge's question
// (cache/verify, judgeprompt) to its own API's model: a short request,
// output of a few tokens, thinking off where the API allows it. The reply
// is read with AnswerText and parsed strictly by the judge.
type Judge struct {
	// Request is the upstream path and body asking model the judge's
	// system instruction and user message.
	Request func(model, system, user string) (path string, body []byte)
	// Headers are the client headers the judge call keeps besides
	// Authorization: the API's own credential header, and what selects the
	// API version or the account. No other: a client's Idempotency-Key
	// must never make the provider take the judge's call for the request
	// itself.
	Headers []string
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
