package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// cachedCompletion is the part of a stored completion that a replay needs.
type cachedCompletion struct {
	completionHead
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role             string          `json:"role"`
			Content          *string         `json:"content"`
			ReasoningContent string          `json:"reasoning_content,omitempty"`
			Refusal          *string         `json:"refusal,omitempty"`
			ToolCalls        json.RawMessage `json:"tool_calls,omitempty"`
		} `json:"message"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

// Replay writes a cached completion as a well-formed SSE stream: a role
// chunk, the content in word-sized pieces, tool calls, the finish chunk, a
// usage chunk when includeUsage, then [DONE]. id and created are the ones
// given (a hit is a fresh completion to the client). flush is called after
// each event so a replay streams like the original did.
func Replay(w io.Writer, flush func(), body []byte, id string, created int64, includeUsage bool) error {
	var cc cachedCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		return fmt.Errorf("replay cached completion: %w", err)
	}
	chat := cc.Object != "text_completion"
	object := "chat.completion.chunk"
	if !chat {
		object = "text_completion"
	}
	send := func(choices any, usage json.RawMessage) error {
		ev := map[string]any{"id": id, "object": object, "created": created, "model": cc.Model, "choices": choices}
		if cc.SystemFingerprint != "" {
			ev["system_fingerprint"] = cc.SystemFingerprint
		}
		if usage != nil {
			ev["usage"] = usage
		}
		return wire.WriteJSONEvent(w, flush, "", ev)
	}
	for _, c := range cc.Choices {
		delta := func(d map[string]any) []map[string]any {
			return []map[string]any{{"index": c.Index, "delta": d, "finish_reason": nil, "logprobs": nil}}
		}
		if chat {
			role := c.Message.Role
			if role == "" {
				role = "assistant"
			}
			if err := send(delta(map[string]any{"role": role, "content": ""}), nil); err != nil {
				return err
			}
			if c.Message.ReasoningContent != "" {
				for _, piece := range wire.Words(c.Message.ReasoningContent) {
					if err := send(delta(map[string]any{"reasoning_content": piece}), nil); err != nil {
						return err
					}
				}
			}
			if c.Message.Content != nil {
				if err := sendPieces(w, flush, wire.Words(*c.Message.Content), c.Index, id, created, cc.Model, cc.SystemFingerprint); err != nil {
					return err
				}
			}
			if c.Message.Refusal != nil && *c.Message.Refusal != "" {
				if err := send(delta(map[string]any{"refusal": *c.Message.Refusal}), nil); err != nil {
					return err
				}
			}
			if len(c.Message.ToolCalls) > 0 && !bytes.Equal(c.Message.ToolCalls, []byte("null")) {
				var calls []map[string]any
				if err := json.Unmarshal(c.Message.ToolCalls, &calls); err != nil {
					return fmt.Errorf("replay tool calls: %w", err)
				}
				for i, call := range calls {
					call["index"] = i
				}
				if err := send(delta(map[string]any{"tool_calls": calls}), nil); err != nil {
					return err
				}
			}
			fin := []map[string]any{{"index": c.Index, "delta": map[string]any{}, "finish_reason": c.FinishReason, "logprobs": nil}}
			if err := send(fin, nil); err != nil {
				return err
			}
			continue
		}
		for _, piece := range wire.Words(c.Text) {
			if err := send([]map[string]any{{"index": c.Index, "text": piece, "finish_reason": nil, "logprobs": nil}}, nil); err != nil {
				return err
			}
		}
		if err := send([]map[string]any{{"index": c.Index, "text": "", "finish_reason": c.FinishReason, "logprobs": nil}}, nil); err != nil {
			return err
		}
	}
	if includeUsage && len(cc.Usage) > 0 {
		if err := send([]any{}, cc.Usage); err != nil {
			return err
		}
	}
	return wire.WriteEvent(w, flush, doneEvent)
}

// doneEvent is wire.DoneEvent as bytes, converted once.
var doneEvent = []byte(wire.DoneEvent)

// sendPieces writes one content chunk per piece (wire.Deltas). The bytes
// are identical to what send produces (keys in json.Marshal's sorted
// order), which TestReplayGolden pins.
func sendPieces(w io.Writer, flush func(), pieces []string, index int, id string, created int64, model, fingerprint string) error {
	if len(pieces) == 0 {
		return nil
	}
	tail := map[string]any{"created": created, "id": id, "model": model, "object": "chat.completion.chunk"}
	if fingerprint != "" {
		tail["system_fingerprint"] = fingerprint
	}
	tb, err := json.Marshal(tail)
	if err != nil {
		return err
	}
	d := wire.Deltas{
		Head: append(wire.AppendEventHead(make([]byte, 0, 48), ""), `{"choices":[{"delta":{"content":`...),
		Tail: append(append([]byte(`},"finish_reason":null,"index":`+strconv.Itoa(index)+`,"logprobs":null}],`), tb[1:]...), "\n\n"...),
	}
	return d.WriteAll(w, flush, pieces)
}
