package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// API registers OpenAI's Responses API: POST /v1/responses through the
// cached flow (its stateful requests passed through, handleResponses), and
// the requests on a response id routed to the upstream that created it.
// Every route that reads a body into memory is under the body budget.
var API = wire.API{
	Name:   "responses",
	Errors: responsesFormat,
	Routes: []wire.Route{
		{Method: http.MethodPost, Path: ResponsesEndpoint, Handler: handleResponses, Budget: true},
		// Echo matches these before the /v1/* catch-all; any other method
		// or sub-path (POST /v1/responses/input_tokens, ...) still reaches
		// the catch-all.
		{Method: http.MethodGet, Path: "/v1/responses/:id", Handler: handleResponseByID},
		{Method: http.MethodDelete, Path: "/v1/responses/:id", Handler: handleResponseByID},
		{Method: http.MethodGet, Path: "/v1/responses/:id/input_items", Handler: handleResponseByID},
		{Method: http.MethodPost, Path: "/v1/responses/:id/cancel", Handler: handleResponseByID},
	},
}

// Format is the Responses Format.
var Format = responsesFormat

// responsesFormat is OpenAI's Responses API, POST /v1/responses: exact and
// semantic tiers, streams relayed and replayed as its typed events, answers
// served with the id the provider gave them.
var responsesFormat = &wire.Format{
	Endpoint: ResponsesEndpoint,
	// The key ignores the cache group: see ResponsesKey.
	Key: func(partition string, _ http.Header, body []byte, _ func(string) string) (wire.Key, error) {
		return ResponsesKey(partition, body)
	},
	Finished:     finished,
	Usage:        responsesUsage.Read,
	Cost:         requestCost,
	AnswerText:   answerText,
	Replay:       wire.ReplayStored(replayResponse),
	NewAssembler: func() wire.StreamAssembler { return newResponsesStream() },
	// The Responses API answers errors in the same shape as the rest of
	// OpenAI's API ({"error":{"message","type","param","code"}}).
	Error:           wire.ObjectError,
	StreamError:     streamError,
	BoundToUpstream: boundToUpstream,
	ResponseID:      responseID,
	StreamResponseID: func(asm wire.StreamAssembler) string {
		if s, ok := asm.(*responsesStream); ok {
			return s.id
		}
		return ""
	},
	// A Responses call is a chat, by OpenAI.
	GenAIOperation: "chat",
	GenAIProvider:  "openai",
	Judge:          judge,
	// Fresh: nil, the stored response is served as the provider sent it.
	// Its id is the provider's: the client may send it back as
	// previous_response_id, and only an id the provider issued (and
	// stored) works there. Minting a new one, as Chat Completions hits do,
	// would break the next turn.
	//
	// Resume: nil, never. A continuation would be a second response with
	// its own id whose context holds the cut text and a continuation
	// instruction; the client would chain its next turn
	// (previous_response_id) onto that, not onto the answer it saw. A cut
	// stream ends with an error event instead.
}

// finished: only a response whose status is "completed". "incomplete" (cut
// by max_output_tokens or the content filter), "failed", "cancelled",
// "queued" and "in_progress" are never served to the next asker.
func finished(body []byte) bool {
	f, err := exactFields(body)
	if err != nil {
		return false
	}
	var object, id, status string
	if json.Unmarshal(f["object"], &object) != nil || object != "response" ||
		json.Unmarshal(f["id"], &id) != nil || id == "" ||
		json.Unmarshal(f["status"], &status) != nil || status != "completed" {
		return false
	}
	if e := f["error"]; len(e) > 0 && !bytes.Equal(e, []byte("null")) {
		return false
	}
	var background bool
	if b := f["background"]; len(b) > 0 && json.Unmarshal(b, &background) == nil && background {
		return false
	}
	return true
}

// streamError ends a cut stream with the API's "error" event
// ({"type":"error","code","message","param"}) that also carries an "error"
// object: the SDKs (openai-go's ssestream, openai-python, openai-node) stop
// and raise on a data payload with a top-level "error", so the client sees
// an error, never a response that silently stopped.
func streamError(err error) []byte {
	msg := wire.InterruptedMessage(err)
	b, _ := json.Marshal(map[string]any{
		"type": "error", "code": "stream_interrupted", "message": msg, "param": nil,
		"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": "stream_interrupted"},
	})
	return wire.EventBytes("error", b)
}

// answerText joins the output_text parts of the response's message items
// (reasoning and function-call items are not what the user reads).
func answerText(body []byte) string {
	var r struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if json.Unmarshal(body, &r) != nil {
		return ""
	}
	var b strings.Builder
	for _, o := range r.Output {
		if o.Type != "message" {
			continue
		}
		for _, c := range o.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// handleResponses serves POST /v1/responses. Requests bound to state the
// provider keeps and changes pass through untouched, to the default upstream
// or, when they continue a response (previous_response_id) another upstream
// created, to that upstream (retrieval, deletion and cancellation of
// responses by id also go to the upstream that created the id when this
// process knows it: handleResponseByID):
//   - background: true: the answer is a queued response polled later by id;
//   - conversation: the conversation's items grow with every turn, so the
//     same request body asks a different question each time, and a cached
//     answer would never be added to the conversation;
//   - a stored prompt without a model: the prompt names it, and the request
//     can be neither routed nor keyed.
//
// Everything else goes through the cached flow.
func handleResponses(h wire.Host) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		body, answered, err := h.Body(c)
		if answered {
			return err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		if why := responsesStateful(body); why != "" {
			h.Logger(c).Debug("responses request passed through", "reason", why)
			// Continuing a response another upstream created: to that one.
			_, prev := boundToUpstream(body)
			return h.Forward(c, prev)
		}
		return h.Serve(c, responsesFormat)
	}
}

// boundToUpstream: a request naming previous_response_id (or a
// conversation) continues a response stored by one provider account, and
// only that account can serve it
// (https://platform.openai.com/docs/guides/conversation-state). Another
// model on the same upstream may (the API takes any model with
// previous_response_id); another upstream may not.
func boundToUpstream(body []byte) (bool, string) {
	f, err := exactFields(body)
	if err != nil {
		return false, ""
	}
	bound := false
	for _, name := range [...]string{"previous_response_id", "conversation"} {
		if v, ok := f[name]; ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			bound = true
		}
	}
	var prev string
	if bound {
		_ = json.Unmarshal(f["previous_response_id"], &prev)
	}
	return bound, prev
}

// responsesStateful names why a Responses request must pass through
// uncached, or "" when it may be cached. Field names are matched exactly, as
// the API matches them; a body that is not a JSON object is left to the
// cached flow, which answers it 400.
func responsesStateful(body []byte) string {
	f, err := exactFields(body)
	if err != nil {
		return ""
	}
	if bytes.Equal(bytes.TrimSpace(f["background"]), []byte("true")) {
		return "background"
	}
	if c, ok := f["conversation"]; ok && !bytes.Equal(bytes.TrimSpace(c), []byte("null")) {
		return "conversation"
	}
	if _, ok := f["model"]; !ok {
		if _, ok := f["prompt"]; ok {
			// A stored prompt may name the model itself; without one the
			// request can be neither routed nor keyed.
			return "prompt without model"
		}
	}
	return ""
}

// exactFields decodes the top level of a JSON object into its fields by
// their exact names (decoding into a struct would match names
// case-insensitively and let "Status" stand in for "status").
func exactFields(body []byte) (map[string]json.RawMessage, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, errors.New("not a JSON object")
	}
	return f, nil
}

// responseID is the top-level "id" of a Responses answer ("" for anything
// else): only a response object is read (a compatible server may leave
// "object" out); an error body has no id. Names are matched exactly. The
// scan stops once "id" and "object" are read, which the API sends first:
// decoding the whole answer was 50 us for a 1,000-word one
// (BenchmarkResponseIDLearn), this is about 3 us.
// Not cache.DecodeObject: it reads an upstream's answer, not a client's
// request, and stops after two fields instead of decoding all of it.
func responseID(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	var id string
	seenObject := false
	for dec.More() && (id == "" || !seenObject) {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var dst any
		var str string
		switch tok {
		case "id":
			if id != "" {
				return "" // a duplicate name: not a response the API sent
			}
			dst = &str
		case "object":
			if seenObject {
				return ""
			}
			seenObject = true
			dst = &str
		default:
			dst = &json.RawMessage{}
		}
		if err := dec.Decode(dst); err != nil {
			return ""
		}
		switch tok {
		case "id":
			id = str
		case "object":
			if str != "response" {
				return ""
			}
		}
	}
	return id
}

// handleResponseByID serves GET and DELETE /v1/responses/{id}, GET
// .../input_items and POST .../cancel
// (https://platform.openai.com/docs/api-reference/responses/get): to the
// upstream that created the id when it is known, else as every other /v1/*
// path (the default upstream).
func handleResponseByID(h wire.Host) echo.HandlerFunc {
	return func(c echo.Context) error {
		return h.Forward(c, c.Param("id"))
	}
}

// OpenAI Responses: usage.input_tokens (cached ones included, listed
// again in input_tokens_details) and usage.output_tokens (reasoning
// included).
var responsesUsage = wire.UsageFields{Field: "usage", Input: []string{"input_tokens"}, Output: []string{"output_tokens"}}
