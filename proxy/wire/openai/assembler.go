package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Assembler rebuilds one Chat or legacy completion from the chunks of a
// stream, so a streamed miss can be cached and later served to stream and
// non-stream requests alike.
type Assembler struct {
	chat        bool // chat.completion.chunk vs text_completion
	id, model   string
	created     int64
	fingerprint string
	choices     map[int]*choiceAcc
	usage       json.RawMessage
	sawDone     bool
}

type choiceAcc struct {
	role      string
	content   strings.Builder
	reasoning strings.Builder
	refusal   strings.Builder
	text      strings.Builder
	tools     map[int]*toolAcc
	finish    *string
}

type toolAcc struct {
	id, typ, name string
	args          strings.Builder
}

// NewAssembler returns the Assembler of a Chat (chat) or legacy completion
// stream.
func NewAssembler(chat bool) *Assembler {
	return &Assembler{chat: chat, choices: map[int]*choiceAcc{}}
}

// completionHead is what a completion and each chunk of its stream start
// with (Chat Completions and legacy Completions).
type completionHead struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Usage             json.RawMessage `json:"usage"`
}

type streamChunk struct {
	completionHead
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			Refusal          *string `json:"refusal"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Text         *string         `json:"text"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	} `json:"choices"`
}

// Add feeds one data payload (not [DONE]).
func (a *Assembler) Add(data []byte) error {
	var ch streamChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return fmt.Errorf("parse stream chunk: %w", err)
	}
	if a.id == "" {
		a.id, a.model, a.created = ch.ID, ch.Model, ch.Created
	}
	if ch.SystemFingerprint != "" {
		a.fingerprint = ch.SystemFingerprint
	}
	if len(ch.Usage) > 0 && !bytes.Equal(ch.Usage, []byte("null")) {
		a.usage = append(json.RawMessage(nil), ch.Usage...)
	}
	for _, c := range ch.Choices {
		acc := a.choices[c.Index]
		if acc == nil {
			acc = &choiceAcc{tools: map[int]*toolAcc{}}
			a.choices[c.Index] = acc
		}
		d := c.Delta
		if d.Role != "" {
			acc.role = d.Role
		}
		if d.Content != nil {
			acc.content.WriteString(*d.Content)
		}
		if d.ReasoningContent != nil {
			acc.reasoning.WriteString(*d.ReasoningContent)
		}
		if d.Reasoning != nil {
			acc.reasoning.WriteString(*d.Reasoning)
		}
		if d.Refusal != nil {
			acc.refusal.WriteString(*d.Refusal)
		}
		if c.Text != nil {
			acc.text.WriteString(*c.Text)
		}
		for _, tc := range d.ToolCalls {
			t := acc.tools[tc.Index]
			if t == nil {
				t = &toolAcc{}
				acc.tools[tc.Index] = t
			}
			if tc.ID != "" {
				t.id = tc.ID
			}
			if tc.Type != "" {
				t.typ = tc.Type
			}
			if tc.Function.Name != "" {
				t.name += tc.Function.Name
			}
			t.args.WriteString(tc.Function.Arguments)
		}
		if c.FinishReason != nil {
			f := *c.FinishReason
			acc.finish = &f
		}
	}
	return nil
}

// Text is everything generated so far for choice 0 (the partial answer a
// resumed stream continues from).
func (a *Assembler) Text() string {
	c := a.choices[0]
	if c == nil {
		return ""
	}
	if a.chat {
		return c.content.String()
	}
	return c.text.String()
}

// MarkDone notes the stream's "data: [DONE]" end marker.
func (a *Assembler) MarkDone() { a.sawDone = true }

// Complete reports whether the stream finished cleanly: [DONE] seen and
// every choice has a finish reason.
func (a *Assembler) Complete() bool {
	if !a.sawDone || len(a.choices) == 0 {
		return false
	}
	for _, c := range a.choices {
		if c.finish == nil {
			return false
		}
	}
	return true
}

// Completion renders the assembled non-stream body.
func (a *Assembler) Completion() ([]byte, error) {
	choices := make([]map[string]any, 0, len(a.choices))
	for _, i := range slices.Sorted(maps.Keys(a.choices)) {
		c := a.choices[i]
		out := map[string]any{"index": i, "finish_reason": c.finish, "logprobs": nil}
		if a.chat {
			role := c.role
			if role == "" {
				role = "assistant"
			}
			msg := map[string]any{"role": role, "content": nil}
			if c.content.Len() > 0 || len(c.tools) == 0 {
				msg["content"] = c.content.String()
			}
			if c.reasoning.Len() > 0 {
				msg["reasoning_content"] = c.reasoning.String()
			}
			if c.refusal.Len() > 0 {
				msg["refusal"] = c.refusal.String()
			}
			if len(c.tools) > 0 {
				calls := make([]map[string]any, 0, len(c.tools))
				for _, k := range slices.Sorted(maps.Keys(c.tools)) {
					t := c.tools[k]
					typ := t.typ
					if typ == "" {
						typ = "function"
					}
					calls = append(calls, map[string]any{"id": t.id, "type": typ,
						"function": map[string]any{"name": t.name, "arguments": t.args.String()}})
				}
				msg["tool_calls"] = calls
			}
			out["message"] = msg
		} else {
			out["text"] = c.text.String()
		}
		choices = append(choices, out)
	}
	object := "text_completion"
	if a.chat {
		object = "chat.completion"
	}
	body := map[string]any{"id": a.id, "object": object, "created": a.created, "model": a.model, "choices": choices}
	if a.fingerprint != "" {
		body["system_fingerprint"] = a.fingerprint
	}
	if len(a.usage) > 0 {
		body["usage"] = a.usage
	}
	return json.Marshal(body)
}

func allFinished(a *Assembler) bool {
	if len(a.choices) == 0 {
		return false
	}
	for _, c := range a.choices {
		if c.finish == nil {
			return false
		}
	}
	return true
}

func anyFinished(a *Assembler) bool {
	for _, c := range a.choices {
		if c.finish != nil {
			return true
		}
	}
	return false
}
