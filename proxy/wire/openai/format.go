package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// The OpenAI formats: Chat Completions (exact and semantic tiers, streams,
// resumption) and the exact-only /v1/completions and /v1/embeddings.
var (
	chatFormat        = openAIFormat{endpoint: ChatEndpoint, chat: true}.format()
	completionsFormat = openAIFormat{endpoint: "/v1/completions"}.format()
	embeddingsFormat  = openAIFormat{endpoint: "/v1/embeddings", embeddings: true}.format()
)

// openAIFormat is an OpenAI endpoint. Only chat is semantic and resumable.
type openAIFormat struct {
	endpoint   string
	chat       bool
	embeddings bool
}

// format is the endpoint's wire.Format.
func (f openAIFormat) format() *wire.Format {
	op := "chat"
	switch {
	case f.embeddings:
		op = "embeddings"
	case !f.chat:
		op = "text_completion"
	}
	wf := &wire.Format{
		Endpoint:     f.endpoint,
		Key:          f.key,
		Finished:     f.finished,
		Usage:        chatUsage.Read,
		Cost:         f.requestCost,
		AnswerText:   verify.AnswerText,
		Replay:       f.replay,
		NewAssembler: f.newAssembler,
		Error:        wire.ObjectError,
		StreamError:  errorEvent,
		ExactOnly:    !f.chat,
		// The key reads the body alone (ChatKey, GenericKey).
		BodyKeyed: true,
		// A stream that closed after every choice finished, without the
		// API's own end marker, gets it: the SDKs wait for it.
		Trailer: func(asm wire.StreamAssembler) []byte {
			if s, ok := asm.(*openAIStream); ok && !s.a.sawDone {
				return []byte(wire.DoneEvent)
			}
			return nil
		},
		GenAIOperation: op,
		GenAIProvider:  "openai",
		// Every answer served gets a new id and created, so it looks like
		// a new completion.
		FreshIDs: &wire.FreshIDs{JSONPrefix: freshIDPrefix, StreamPrefix: f.replayIDPrefix(), ReplayWith: Replay},
		Judge:    chatJudgeOf,
	}
	if f.chat {
		wf.Resume = resumeChat
	}
	return wf
}

func (f openAIFormat) key(partition string, _ http.Header, body []byte, group func(string) string) (wire.Key, error) {
	if f.chat {
		return ChatKey(partition, body, group)
	}
	return GenericKey(partition, f.endpoint, body)
}

// finished: embeddings with data; completions whose every choice finished
// with a reason worth serving again.
func (f openAIFormat) finished(body []byte) bool {
	if f.embeddings {
		var r struct {
			Data []json.RawMessage `json:"data"`
		}
		return json.Unmarshal(body, &r) == nil && len(r.Data) > 0
	}
	return finishedChoices(body)
}

func (f openAIFormat) replay(w io.Writer, flush func(), stored, req []byte, now time.Time) error {
	// Exact field names, as the key read them (encoding/json would also
	// accept "Stream_Options").
	includeUsage := false
	if obj, err := cache.DecodeObject(req); err == nil {
		so, _ := obj["stream_options"].(map[string]any)
		includeUsage, _ = so["include_usage"].(bool)
	}
	return Replay(w, flush, stored, f.replayIDPrefix()+string(wire.AppendRandomHex(nil, 12)), now.Unix(), includeUsage)
}

func (f openAIFormat) newAssembler() wire.StreamAssembler {
	return &openAIStream{a: NewAssembler(f.chat)}
}

// resumeChat asks the next target to continue a cut answer: the partial
// answer goes in as an assistant turn, followed by a continuation
// instruction.
func resumeChat(body []byte, asm wire.StreamAssembler) ([]byte, error) {
	return wire.ResumeBody(body, "messages", wire.ContinueTurns("assistant", asm.Partial(), func(role, text string) any {
		return map[string]string{"role": role, "content": text}
	}))
}

// AnswerText reads the first choice's message content, or a completion's
// text (verify.AnswerText). Usage reads usage.prompt_tokens and
// usage.completion_tokens.

// openAIStream adapts the chunk Assembler to wire.StreamAssembler.
type openAIStream struct{ a *Assembler }

func (s *openAIStream) Feed(ev wire.Event, raw []byte, resumed bool) ([]byte, bool, error) {
	a := s.a
	if ev.Event == "error" {
		return nil, false, wire.UpstreamErrorEvent(ev.Data)
	}
	if ev.Done() {
		a.sawDone = true
		return raw, true, nil
	}
	if len(ev.Data) == 0 {
		return nil, false, nil
	}
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(ev.Data, &probe) == nil && len(probe.Error) > 0 && string(probe.Error) != "null" {
		return nil, false, wire.UpstreamErrorObject(probe.Error)
	}
	before := len(a.Text())
	if err := a.Add(ev.Data); err != nil {
		return nil, false, err
	}
	// A resumed stream's role-only first chunk is dropped: the client
	// already has one.
	if resumed && len(a.Text()) == before && !anyFinished(a) {
		return nil, false, nil
	}
	return raw, false, nil
}

func (s *openAIStream) FinishedAtEOF() bool { return s.a.Complete() || allFinished(s.a) }

func (s *openAIStream) Partial() string { return s.a.Text() }

func (s *openAIStream) Complete() bool { return s.a.Complete() }

func (s *openAIStream) Body() ([]byte, error) { return s.a.Completion() }

// finishedChoices reports whether a completion body is worth caching:
// well-formed, with at least one choice, and every choice finished.
func finishedChoices(body []byte) bool {
	var r struct {
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &r) != nil || len(r.Choices) == 0 {
		return false
	}
	for _, ch := range r.Choices {
		if ch.FinishReason == nil {
			return false
		}
		switch *ch.FinishReason {
		case "stop", "length", "tool_calls", "function_call":
		default:
			// content_filter and anything unknown: the upstream refused or
			// cut the answer; never serve that to the next asker.
			return false
		}
	}
	return true
}

// freshIDPrefix: a legacy completion's id starts "cmpl-", a chat
// completion's "chatcmpl-"; a fresh one keeps the kind.
func freshIDPrefix(storedID []byte) string {
	if len(storedID) > 6 && string(storedID[:6]) == `"cmpl-` {
		return "cmpl-bw"
	}
	return "chatcmpl-bw"
}

// replayIDPrefix is the prefix of the endpoint's stream chunks' ids.
func (f openAIFormat) replayIDPrefix() string {
	if !f.chat {
		return "cmpl-bw"
	}
	return "chatcmpl-bw"
}

// errorEvent is the event ending a cut Chat stream.
func errorEvent(err error) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": wire.InterruptedMessage(err),
		"type":    "server_error", "param": nil, "code": "stream_interrupted",
	}})
	// A data-only event whose object has "error": what the API itself sends,
	// and what the SDKs raise as an error (openai-python checks data.error,
	// go-openai accumulates a data: {"error": line and returns it at EOF; a
	// named "event: error" line would be mis-parsed by go-openai).
	return wire.EventBytes("", b)
}

// OpenAI Chat and legacy Completions: usage.prompt_tokens and
// usage.completion_tokens (reasoning tokens are already inside
// completion_tokens). Embeddings report prompt_tokens alone.
var chatUsage = wire.UsageFields{Field: "usage", Input: []string{"prompt_tokens"}, Output: []string{"completion_tokens"}}

// handleModels answers GET /v1/models with the configured routes' names, in
// the list shape of OpenAI's API (a request another API claims was passed
// through before: the route Yields).
func handleModels(h wire.Host) echo.HandlerFunc {
	return func(c echo.Context) error {
		type model struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		}
		names := h.Models()
		data := make([]model, 0, len(names))
		for _, m := range names {
			data = append(data, model{ID: m, Object: "model", OwnedBy: "breakwater"})
		}
		return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
	}
}

// API registers OpenAI's API: Chat Completions (exact and semantic tiers,
// streams, resumption), the exact-only /v1/completions and /v1/embeddings,
// and the model list. It claims no request by its headers: it is the default
// API, whose error shape every request no other API claims gets (OpenAI's
// shape is what OpenAI-compatible clients parse), so it comes first in
// proxy/wire/apis.All.
var API = wire.API{
	Name:   "openai",
	Errors: chatFormat,
	Routes: []wire.Route{
		{Method: http.MethodPost, Path: ChatEndpoint, Format: chatFormat},
		{Method: http.MethodPost, Path: "/v1/completions", Format: completionsFormat},
		{Method: http.MethodPost, Path: "/v1/embeddings", Format: embeddingsFormat},
		// A request another API's SDK sends (an Anthropic SDK's, by its
		// headers) is passed through to list that API's models.
		{Method: http.MethodGet, Path: "/v1/models", Handler: handleModels, Yield: true},
	},
}

// The Formats of the three cached endpoints.
var (
	Chat        = chatFormat
	Completions = completionsFormat
	Embeddings  = embeddingsFormat
)
