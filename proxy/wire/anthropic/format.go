package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// messagesFormat is the Anthropic Messages API (POST /v1/messages).
var messagesFormat = &wire.Format{
	Endpoint:     MessagesEndpoint,
	Key:          messagesKey,
	Finished:     finished,
	Usage:        messagesUsage.Read,
	Cost:         requestCost,
	AnswerText:   answerText,
	Replay:       wire.ReplayStored(replayMessage),
	NewAssembler: func() wire.StreamAssembler { return newMessageStream() },
	Error:        messagesError,
	StreamError:  streamError,
	Resume:       resume,
	// A Messages call is a chat, by Anthropic.
	GenAIOperation: "chat",
	GenAIProvider:  "anthropic",
	Judge:          judge,
	// Fresh: nil, the message is served as stored: a Messages answer has no
	// creation time, and its id names the message the client may compare
	// against. ShapeRequest: nil, the model is a body field (the caller's
	// default rewrite for a fallback target).
}

// Anthropic request headers: the API version and beta features shape the
// answer, so both are part of the key and forwarded as sent.
const (
	headerAnthropicVersion = "Anthropic-Version"
	headerAnthropicBeta    = "Anthropic-Beta"
)

func messagesKey(partition string, h http.Header, body []byte, group func(string) string) (wire.Key, error) {
	shaping := map[string]string{}
	for _, name := range []string{headerAnthropicVersion, headerAnthropicBeta} {
		if v := h.Values(name); len(v) > 0 {
			shaping[name] = strings.Join(v, ",")
		}
	}
	return MessagesKey(partition, body, group, shaping)
}

// finished: a message that ended on its own (end_turn, stop_sequence,
// tool_use) or at max_tokens, under the same policy as OpenAI's "length".
// refusal, pause_turn, model_context_window_exceeded and anything unknown
// are never stored.
func finished(body []byte) bool {
	var m struct {
		Type       string            `json:"type"`
		Role       string            `json:"role"`
		Content    []json.RawMessage `json:"content"`
		StopReason *string           `json:"stop_reason"`
	}
	if json.Unmarshal(body, &m) != nil || m.Type != "message" || m.Role != "assistant" || m.StopReason == nil {
		return false
	}
	return finishedStopReason(*m.StopReason)
}

func finishedStopReason(r string) bool {
	switch r {
	case "end_turn", "stop_sequence", "tool_use", "max_tokens":
		return true
	}
	return false
}

// resume continues a cut answer by prefilling it as the assistant turn (the
// model continues a final assistant turn). Only text can be continued: an
// answer that already holds thinking or tool use, or a request with
// thinking enabled (the API refuses a prefill with thinking), ends with an
// error event instead. A model that does not accept prefill answers the
// resume request with a 400, which ends the stream the same way.
func resume(body []byte, asm wire.StreamAssembler) ([]byte, error) {
	ms, ok := asm.(*messageStream)
	if !ok {
		return nil, wire.ErrNoResume
	}
	return wire.ResumeBody(body, "messages", func(req map[string]json.RawMessage, msgs []json.RawMessage) ([]json.RawMessage, error) {
		if t := req["thinking"]; len(t) > 0 {
			// A map, not a struct: encoding/json matches struct fields
			// case-insensitively, and the request was keyed by exact names.
			var th map[string]any
			if json.Unmarshal(t, &th) != nil || th["type"] != "disabled" {
				return nil, wire.ErrNoResume
			}
		}
		partial, ok := ms.textOnly()
		if !ok || len(msgs) == 0 {
			return nil, wire.ErrNoResume
		}
		var last map[string]json.RawMessage
		if json.Unmarshal(msgs[len(msgs)-1], &last) != nil {
			return nil, wire.ErrNoResume
		}
		var role string
		_ = json.Unmarshal(last["role"], &role)
		prefill := partial
		if role == "assistant" {
			// The client prefilled the answer itself: the model continues it.
			var s string
			if json.Unmarshal(last["content"], &s) != nil {
				return nil, wire.ErrNoResume
			}
			prefill = s + partial
			msgs = msgs[:len(msgs)-1]
		}
		// The API refuses a final assistant turn ending in whitespace; the
		// continuation brings it back, and the stream drops it once.
		trimmed := strings.TrimRightFunc(prefill, unicode.IsSpace)
		ms.beginResume(prefill[len(trimmed):])
		if trimmed != "" {
			turn, _ := json.Marshal(map[string]string{"role": "assistant", "content": trimmed}) // strings only: never fails
			msgs = append(msgs, turn)
		}
		return msgs, nil
	})
}

// anthropicError is the Messages API error body.
type anthropicError struct {
	Type  string             `json:"type"`
	Error anthropicErrorBody `json:"error"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// messagesError answers in Anthropic's shape and statuses. Saturation (every
// target's queue full, every target unavailable, or an upstream's 503/529)
// is 529 overloaded_error, the status Anthropic's SDKs know as "retry
// later"; the caller's Retry-After goes with it.
func messagesError(status int, code, message string) (int, []byte) {
	switch {
	case code == upstream.CodeCapacityExceeded || code == upstream.CodeNoHealthyTarget,
		status == http.StatusServiceUnavailable, status == statusOverloaded:
		status = statusOverloaded
	}
	body, _ := json.Marshal(anthropicError{Type: "error", Error: anthropicErrorBody{Type: anthropicErrorType(status), Message: message}})
	return status, body
}

// statusOverloaded is Anthropic's "overloaded" status.
const statusOverloaded = 529

// anthropicErrorType maps a status to the error types of Anthropic's
// documented error list.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case statusOverloaded:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// answerText joins the message's text blocks (thinking and tool_use blocks
// are not what the user reads).
func answerText(body []byte) string {
	var m struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// streamError is the error event the API itself sends mid-stream; the SDKs
// raise it as an APIError (never a clean end).
func streamError(err error) []byte {
	body, _ := json.Marshal(anthropicError{Type: "error", Error: anthropicErrorBody{
		Type:    "overloaded_error",
		Message: wire.InterruptedMessage(err),
	}})
	return wire.EventBytes("error", body)
}

// Anthropic Messages: "the total input tokens in a request is the
// summation of input_tokens, cache_creation_input_tokens, and
// cache_read_input_tokens" (Messages API reference, usage).
var messagesUsage = wire.UsageFields{Field: "usage",
	Input:  []string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"},
	Output: []string{"output_tokens"}}

// API registers Anthropic's Messages API: POST /v1/messages through the
// cached flow; every other request carrying anthropic-version (every
// Anthropic SDK sends it: count_tokens, batches, models, files) is passed
// through to the Anthropic upstream and answered errors in its shape.
var API = wire.API{
	Name:   "anthropic",
	Errors: messagesFormat,
	Claims: func(h http.Header) bool { return h.Get(headerAnthropicVersion) != "" },
	Routes: []wire.Route{{Method: http.MethodPost, Path: MessagesEndpoint, Format: messagesFormat}},
}

// Format is the Messages Format.
var Format = messagesFormat
