package openai

import (
	"encoding/json"
	"fmt"
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
	chatFormat        wire.Format = openAIFormat{endpoint: ChatEndpoint, chat: true}
	completionsFormat wire.Format = openAIFormat{endpoint: "/v1/completions"}
	embeddingsFormat  wire.Format = openAIFormat{endpoint: "/v1/embeddings", embeddings: true}
)

// openAIFormat is an OpenAI endpoint. Only chat is semantic and resumable.
type openAIFormat struct {
	endpoint   string
	chat       bool
	embeddings bool
}

func (f openAIFormat) Endpoint() string { return f.endpoint }

func (f openAIFormat) Semantic() bool { return f.chat }

func (f openAIFormat) Key(partition string, _ http.Header, body []byte, group func(string) string) (cache.Key, error) {
	if f.chat {
		return ChatKey(partition, body, group)
	}
	return cache.GenericKey(partition, f.endpoint, body)
}

// Finished: embeddings with data; completions whose every choice finished
// with a reason worth serving again.
func (f openAIFormat) Finished(body []byte) bool {
	if f.embeddings {
		var r struct {
			Data []json.RawMessage `json:"data"`
		}
		return json.Unmarshal(body, &r) == nil && len(r.Data) > 0
	}
	return finishedChoices(body)
}

// Fresh gives the body a new id and created, so every answer looks like a
// new completion.
func (f openAIFormat) Fresh(body []byte, now time.Time) []byte {
	return wire.PrepareIdentity(body, f.FreshIDPrefix).AppendTo(make([]byte, 0, len(body)+32), now)
}

func (f openAIFormat) Replay(w io.Writer, flush func(), stored, req []byte, now time.Time) error {
	// Exact field names, as the key read them (encoding/json would also
	// accept "Stream_Options").
	includeUsage := false
	if obj, err := cache.DecodeObject(req); err == nil {
		so, _ := obj["stream_options"].(map[string]any)
		includeUsage, _ = so["include_usage"].(bool)
	}
	return Replay(w, flush, stored, f.ReplayIDPrefix()+string(wire.AppendRandomHex(nil, 12)), now.Unix(), includeUsage)
}

func (f openAIFormat) NewAssembler() wire.StreamAssembler {
	return &openAIStream{a: NewAssembler(f.chat)}
}

func (f openAIFormat) Resume(body []byte, asm wire.StreamAssembler) ([]byte, error) {
	if !f.chat {
		return nil, wire.ErrNoResume
	}
	return resumeChatBody(body, asm.Partial())
}

// ForModel: the caller's default, the body's "model" field rewritten.
func (f openAIFormat) ForModel(string, []byte) func(string) (string, []byte) { return nil }

func (f openAIFormat) Error(status int, code, message string) (int, []byte) {
	return status, wire.ErrorObjectJSON(status, code, message)
}

func (f openAIFormat) StreamError(err error) []byte { return errorEvent(err) }

// AnswerText reads the first choice's message content, or a completion's text.
// Usage reads usage.prompt_tokens and usage.completion_tokens.
func (f openAIFormat) Usage(body []byte) wire.Usage { return chatUsage.Read(body) }

func (f openAIFormat) AnswerText(body []byte) string { return verify.AnswerText(body) }

// openAIStream adapts the chunk Assembler to wire.StreamAssembler.
type openAIStream struct{ a *Assembler }

func (s *openAIStream) Feed(ev wire.Event, raw []byte, resumed bool) ([]byte, bool, error) {
	a := s.a
	if ev.Event == "error" {
		return nil, false, fmt.Errorf("the upstream sent an error event: %s", wire.Truncate(string(ev.Data), 200))
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
		return nil, false, fmt.Errorf("the upstream sent an error mid-stream: %s", wire.Truncate(string(probe.Error), 200))
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

func (s *openAIStream) Trailer() []byte {
	if s.a.sawDone {
		return nil
	}
	return []byte("data: [DONE]\n\n")
}

func (s *openAIStream) Complete() bool { return s.a.Complete() }

func (s *openAIStream) Body() ([]byte, error) { return s.a.Completion() }

// resumeChatBody asks the next target to continue a cut answer: the partial
// answer goes in as an assistant turn, followed by a continuation instruction.
func resumeChatBody(orig []byte, partial string) ([]byte, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(orig, &body); err != nil {
		return nil, fmt.Errorf("build resume request: %w", err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return nil, fmt.Errorf("build resume request: %w", err)
	}
	asst, _ := json.Marshal(map[string]string{"role": "assistant", "content": partial})
	cont, _ := json.Marshal(map[string]string{"role": "user", "content": wire.ResumeInstruction})
	msgs = append(msgs, asst, cont)
	body["messages"], _ = json.Marshal(msgs)
	nb, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("build resume request: %w", err)
	}
	return nb, nil
}

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

func (openAIFormat) BodyKeyed() {}

// FreshIDPrefix: a legacy completion's id starts "cmpl-", a chat
// completion's "chatcmpl-"; a fresh one keeps the kind.
func (openAIFormat) FreshIDPrefix(storedID []byte) string {
	if len(storedID) > 6 && string(storedID[:6]) == `"cmpl-` {
		return "cmpl-bw"
	}
	return "chatcmpl-bw"
}

// ReplayIDPrefix is the prefix of the endpoint's stream chunks' ids.
func (f openAIFormat) ReplayIDPrefix() string {
	if !f.chat {
		return "cmpl-bw"
	}
	return "chatcmpl-bw"
}

// ReplayWith is Replay with the id and created given.
func (openAIFormat) ReplayWith(w io.Writer, flush func(), stored []byte, id string, created int64, includeUsage bool) error {
	return Replay(w, flush, stored, id, created, includeUsage)
}

// GenAI: OpenAI's operations as the GenAI conventions name them.
func (f openAIFormat) GenAI() (string, string) {
	switch {
	case f.embeddings:
		return "embeddings", "openai"
	case !f.chat:
		return "text_completion", "openai"
	}
	return "chat", "openai"
}

// errorEvent is the event ending a cut Chat stream.
func errorEvent(err error) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": "breakwater: the answer stream was interrupted and could not be resumed: " + err.Error(),
		"type":    "server_error", "param": nil, "code": "stream_interrupted",
	}})
	// A data-only event whose object has "error": what the API itself sends,
	// and what the SDKs raise as an error (openai-python checks data.error,
	// go-openai accumulates a data: {"error": line and returns it at EOF; a
	// named "event: error" line would be mis-parsed by go-openai).
	return []byte("data: " + string(b) + "\n\n")
}

// OpenAI Chat and legacy Completions: usage.prompt_tokens and
// usage.completion_tokens (reasoning tokens are already inside
// completion_tokens). Embeddings report prompt_tokens alone.
var chatUsage = wire.UsageFields{Field: "usage", Input: []string{"prompt_tokens"}, Output: []string{"completion_tokens"}}

// handleModels answers GET /v1/models with the configured routes' names, in
// the list shape of OpenAI's API; a request another API claims (an
// Anthropic SDK's, by its headers) is passed through to list that API's.
func handleModels(h wire.Host) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h.Claimant(c.Request().Header) != "" {
			return h.Forward(c)
		}
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
		{Method: http.MethodGet, Path: "/v1/models", Handler: handleModels},
	},
}

// The Formats of the three cached endpoints.
var (
	Chat        = chatFormat
	Completions = completionsFormat
	Embeddings  = embeddingsFormat
)
