package proxy

import (
	"io"
	"net/url"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/wire/gemini/geminitest"

	"github.com/breakwater-dev/breakwater/proxy/wire"
	"github.com/breakwater-dev/breakwater/proxy/wire/anthropic"
	"github.com/breakwater-dev/breakwater/proxy/wire/gemini"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
	"github.com/breakwater-dev/breakwater/proxy/wire/responses"
)

// The shared helpers moved to proxy/wire; the tests keep their names.
var (
	words    = wire.Words
	truncate = wire.Truncate
)

// The Gemini API moved to proxy/wire/gemini; the tests here reach it through
// its Format.
var geminiErrors = gemini.Errors

func newGeminiStream(bool) StreamAssembler { return geminiErrors.NewAssembler() }

func geminiReplay(w io.Writer, flush func(), stored []byte) error {
	return geminiErrors.Replay(w, flush, stored, nil, time.Time{})
}

// Real refusals of the Gemini API (geminitest).
const (
	geminiPerMinute  = geminitest.PerMinute
	geminiPerDay     = geminitest.PerDay
	geminiLimitZero  = geminitest.LimitZero
	geminiOverloaded = geminitest.Overloaded
)

// homeUpstream makes up the home upstream of the API named api, with root as
// its pass-through target.
func homeUpstream(o *Options, api, up string, root *url.URL) {
	if o.APIUpstreams == nil {
		o.APIUpstreams = map[string]string{}
	}
	o.APIUpstreams[api] = up
	if root == nil {
		return
	}
	if o.Upstreams == nil {
		o.Upstreams = map[string]PassthroughTarget{}
	}
	o.Upstreams[up] = PassthroughTarget{Root: root}
}

// The Messages API moved to proxy/wire/anthropic.
var messagesFormat = anthropic.Format

func newMessageStream() StreamAssembler { return messagesFormat.NewAssembler() }

func replayMessage(w io.Writer, flush func(), stored []byte) error {
	return messagesFormat.Replay(w, flush, stored, nil, time.Time{})
}

// The Responses API moved to proxy/wire/responses; these tests reach it
// through its Format and its hooks.
var responsesFormat = responses.Format

type responsesAPI struct{}

func (responsesAPI) ResponseID(body []byte) string {
	return responsesFormat.ResponseID(body)
}

func (responsesAPI) BoundToUpstream(body []byte) (bool, string) {
	return responsesFormat.BoundToUpstream(body)
}

func (responsesAPI) Finished(body []byte) bool { return responsesFormat.Finished(body) }

func newResponsesStream() StreamAssembler { return responsesFormat.NewAssembler() }

func replayResponse(w io.Writer, flush func(), stored []byte) error {
	return responsesFormat.Replay(w, flush, stored, nil, time.Time{})
}

// apiError is the error body of the OpenAI APIs.
type apiError = wire.ErrorObject

// OpenAI's API moved to proxy/wire/openai; these tests reach it through its
// Formats and its exported parts.
var (
	chatFormat        = openai.Chat
	completionsFormat = openai.Completions
	embeddingsFormat  = openai.Embeddings
	replay            = openai.Replay
)

// assembler is the Chat stream's assembler with the names these tests use.
type assembler struct {
	*openai.Assembler
	sawDone bool
}

func newAssembler(chat bool) *assembler { return &assembler{Assembler: openai.NewAssembler(chat)} }

func (a *assembler) add(data []byte) error { return a.Add(data) }

func (a *assembler) text() string { return a.Text() }

func (a *assembler) complete() bool {
	if a.sawDone {
		a.MarkDone()
	}
	return a.Complete()
}

func (a *assembler) completion() ([]byte, error) { return a.Completion() }
