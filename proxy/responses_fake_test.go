package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// fakeResponses is a loopback upstream speaking OpenAI's Responses API. It
// answers POST /v1/responses from the last user text and the
// previous_response_id, keeps every response it created by id (as the
// provider does when store is true), answers a previous_response_id it never
// issued with the provider's 404, and serves GET, DELETE and cancel by id.
type fakeResponses struct {
	mu      sync.Mutex
	n       int
	stored  map[string]map[string]any
	creates atomic.Int64 // POST /v1/responses calls
	byID    atomic.Int64 // calls under /v1/responses/{id}
	// status of the responses it creates: "completed" unless set.
	status string
	// cutAfter > 0 closes a stream after that many text deltas, with no
	// terminal event.
	cutAfter int
	// errorEvent sends the API's "error" event in place of the answer.
	errorEvent bool
	// prefix names the ids it creates (resp_<prefix>1, ...): "up" unless
	// set, so that two upstreams issue different ids as providers do.
	prefix string
}

func newFakeResponses() *fakeResponses {
	return &fakeResponses{stored: map[string]map[string]any{}}
}

// install makes e's upstream speak the Responses API (other paths keep the
// Chat Completions behaviour).
func (f *fakeResponses) install(e *env) {
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		switch {
		case r.URL.Path == "/v1/responses" && r.Method == http.MethodPost:
			f.create(w, body)
		case strings.HasPrefix(r.URL.Path, "/v1/responses/"):
			f.byID.Add(1)
			f.serveID(w, r)
		default:
			return false
		}
		return true
	}
}

func (f *fakeResponses) create(w http.ResponseWriter, body map[string]any) {
	f.creates.Add(1)
	prev, _ := body["previous_response_id"].(string)
	f.mu.Lock()
	if _, known := f.stored[prev]; prev != "" && !known {
		f.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("Previous response with id '%s' not found.", prev),
			"type":    "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}})
		return
	}
	f.n++
	prefix := f.prefix
	if prefix == "" {
		prefix = "up"
	}
	id := fmt.Sprintf("resp_%s%d", prefix, f.n)
	msgID := fmt.Sprintf("msg_%s%d", prefix, f.n)
	status := f.status
	f.mu.Unlock()
	if status == "" {
		status = "completed"
	}
	answer := "answer to: " + responsesLastUser(body)
	if prev != "" {
		answer += " (after " + prev + ")"
	}
	background, _ := body["background"].(bool)
	if background {
		status = "queued"
	}
	resp := map[string]any{
		"id": id, "object": "response", "created_at": 1700000000, "status": status, "background": background,
		"error": nil, "incomplete_details": nil, "instructions": body["instructions"], "metadata": map[string]any{},
		"model": body["model"], "parallel_tool_calls": true, "previous_response_id": nilIfEmpty(prev),
		"temperature": 1.0, "tool_choice": "auto", "tools": []any{}, "top_p": 1.0,
		"text":   map[string]any{"format": map[string]any{"type": "text"}},
		"output": []any{},
		"usage":  map[string]any{"input_tokens": 5, "output_tokens": 5, "total_tokens": 10},
	}
	if status == "incomplete" {
		resp["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	}
	if !background {
		resp["output"] = []any{map[string]any{
			"id": msgID, "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": answer, "annotations": []any{}, "logprobs": []any{}}},
		}}
	}
	if store, ok := body["store"].(bool); !ok || store {
		f.mu.Lock()
		f.stored[id] = resp
		f.mu.Unlock()
	}
	if s, _ := body["stream"].(bool); s {
		f.stream(w, resp, msgID, answer)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// stream writes resp as the Responses API streams it.
func (f *fakeResponses) stream(w http.ResponseWriter, resp map[string]any, msgID, answer string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	seq := 0
	send := func(typ string, ev map[string]any) {
		ev["type"] = typ
		ev["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		fl.Flush()
	}
	pending := map[string]any{}
	for k, v := range resp {
		pending[k] = v
	}
	pending["status"], pending["output"], pending["usage"] = "in_progress", []any{}, nil
	send("response.created", map[string]any{"response": pending})
	send("response.in_progress", map[string]any{"response": pending})
	if f.errorEvent {
		send("error", map[string]any{"code": "server_error", "message": "The server had an error while processing your request.", "param": nil})
		return
	}
	send("response.output_item.added", map[string]any{"output_index": 0,
		"item": map[string]any{"id": msgID, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
	at := func(m map[string]any) map[string]any {
		m["item_id"], m["output_index"], m["content_index"] = msgID, 0, 0
		return m
	}
	send("response.content_part.added", at(map[string]any{"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}))
	for i, p := range words(answer) {
		if f.cutAfter > 0 && i == f.cutAfter {
			return // the connection closes mid-answer
		}
		send("response.output_text.delta", at(map[string]any{"delta": p, "logprobs": []any{}, "obfuscation": "xyz"}))
	}
	part := map[string]any{"type": "output_text", "text": answer, "annotations": []any{}, "logprobs": []any{}}
	send("response.output_text.done", at(map[string]any{"text": answer, "logprobs": []any{}}))
	send("response.content_part.done", at(map[string]any{"part": part}))
	send("response.output_item.done", map[string]any{"output_index": 0, "item": resp["output"].([]any)[0]})
	final := "response.completed"
	if resp["status"] == "incomplete" {
		final = "response.incomplete"
	}
	send(final, map[string]any{"response": resp})
}

func (f *fakeResponses) serveID(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/responses/")
	id, sub, _ := strings.Cut(rest, "/")
	f.mu.Lock()
	resp, ok := f.stored[id]
	if ok && r.Method == http.MethodDelete {
		delete(f.stored, id)
	}
	if ok && sub == "cancel" {
		resp["status"] = "cancelled"
	}
	f.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("Response with id '%s' not found.", id), "type": "invalid_request_error", "param": nil, "code": nil}})
		return
	}
	switch {
	case r.Method == http.MethodDelete:
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	case sub == "input_items":
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}, "has_more": false})
	default:
		writeJSON(w, http.StatusOK, resp)
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// responsesLastUser is the text of the last user message of a Responses
// request's input (a string input is one).
func responsesLastUser(body map[string]any) string {
	switch in := body["input"].(type) {
	case string:
		return in
	case []any:
		for i := len(in) - 1; i >= 0; i-- {
			m, _ := in[i].(map[string]any)
			if m["role"] != "user" {
				continue
			}
			switch c := m["content"].(type) {
			case string:
				return c
			case []any:
				var parts []string
				for _, p := range c {
					pm, _ := p.(map[string]any)
					if s, ok := pm["text"].(string); ok {
						parts = append(parts, s)
					}
				}
				return strings.Join(parts, "\n")
			}
		}
	}
	return ""
}
