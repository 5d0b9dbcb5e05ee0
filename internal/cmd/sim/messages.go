package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// messagesRequest is the part of an Anthropic Messages request the sim reads.
type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// messages answers POST /v1/messages as the Anthropic API does: a message,
// or its named event stream. A final assistant turn is a prefill: the answer
// continues it. Beyond capacity the call is refused with 529
// overloaded_error (see model), and a CutRate share of streams ends with an
// overloaded_error event halfway, after the 200.
func (s *Sim) messages(w http.ResponseWriter, r *http.Request, release func()) {
	var req messagesRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil || len(req.Messages) == 0 {
		release()
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "sim: messages: a JSON body with messages is required")
		return
	}
	question, prefill, prompt := "", "", 0
	for _, m := range req.Messages {
		t := text(m.Content)
		prompt += tokens(t)
		if m.Role == "user" {
			question, prefill = t, ""
		} else {
			prefill = t
		}
	}
	system := text(req.System)
	prompt += tokens(system)
	ans, judged := s.judge(system, question)
	if !judged {
		ans = Answer(question)
	}
	if prefill != "" && strings.HasPrefix(ans, prefill) {
		ans = ans[len(prefill):]
	}
	model := req.Model
	if model == "" {
		model = s.opts.Models[0]
	}
	words := strings.Fields(ans)
	s.settle(r, len(words))
	s.promptTokens.Add(int64(prompt))
	s.outputTokens.Add(int64(len(words)))
	msg := map[string]any{
		"id": fmt.Sprintf("msg_sim_%d", s.calls.Load()), "type": "message", "role": "assistant", "model": model,
		"content": []any{map[string]any{"type": "text", "text": ans}}, "stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": prompt, "output_tokens": len(words)},
	}
	if !req.Stream {
		if !sleep(r, time.Duration(len(words))*s.opts.PerToken) {
			return
		}
		s.ok.Add(1)
		release()
		writeJSON(w, http.StatusOK, msg)
		return
	}
	s.mu.Lock()
	cut := s.opts.CutRate > 0 && s.rng.Float64() < s.opts.CutRate
	s.mu.Unlock()
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(typ string, ev map[string]any) error {
		ev["type"] = typ
		b, _ := json.Marshal(ev)
		_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
		return err
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = map[string]any{"input_tokens": prompt, "output_tokens": 1}
	if send("message_start", map[string]any{"message": start}) != nil ||
		send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}) != nil {
		return
	}
	pieces := strings.SplitAfter(ans, " ")
	for i, piece := range pieces {
		if cut && i == len(pieces)/2 {
			s.errors.Add(1)
			release()
			fmt.Fprint(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
			return
		}
		if send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": piece}}) != nil {
			return
		}
		if !sleep(r, s.opts.PerToken) {
			return
		}
	}
	s.ok.Add(1)
	release()
	_ = send("content_block_stop", map[string]any{"index": 0})
	_ = send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": len(words)}})
	_ = send("message_stop", map[string]any{})
}

// writeAnthropicError writes the Messages API's error body.
func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
