package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// sseEvent is one Server-Sent Event (wire.Event).
type sseEvent = wire.Event

// sseReader reads events from an SSE body (text/event-stream, per the WHATWG
// spec as far as the OpenAI API uses it: data, event, comments).
type sseReader struct {
	r   *bufio.Reader
	raw bytes.Buffer // the bytes of the current event as received
	max int          // most bytes of one event; <= 0: no limit
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// newBoundedSSEReader is newSSEReader refusing events (with all their
// lines) longer than max bytes with errEventTooLarge: a line is read in
// buffer-sized pieces, never whole before it is measured.
func newBoundedSSEReader(r io.Reader, max int) *sseReader {
	rd := newSSEReader(r)
	rd.max = max
	return rd
}

// readLine appends the next line (with its newline, if any) to raw and
// returns it; the slice is valid until raw changes.
func (s *sseReader) readLine() ([]byte, error) {
	start := s.raw.Len()
	for {
		frag, err := s.r.ReadSlice('\n')
		if s.max > 0 && s.raw.Len()+len(frag) > s.max {
			return nil, errEventTooLarge
		}
		s.raw.Write(frag)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return s.raw.Bytes()[start:], err
	}
}

// next returns the next event and its raw bytes (valid until the next call).
// io.EOF means the body ended between events; io.ErrUnexpectedEOF that it
// ended inside one.
func (s *sseReader) next() (sseEvent, []byte, error) {
	var ev sseEvent
	var data [][]byte
	s.raw.Reset()
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(bytes.TrimSpace(s.raw.Bytes())) == 0 {
					return ev, nil, io.EOF
				}
				if len(line) > 0 {
					// A last event without its blank line: accept it if the
					// line itself is complete JSON or [DONE]; the caller
					// judges completeness by finish_reason and [DONE].
					data = appendField(data, &ev, bytes.TrimRight(line, "\r\n"))
				}
				if len(data) > 0 {
					ev.Data = bytes.Join(data, []byte("\n"))
					return ev, s.raw.Bytes(), nil
				}
				return ev, nil, io.ErrUnexpectedEOF
			}
			return ev, nil, err
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if len(trimmed) == 0 {
			if len(data) == 0 && ev.Event == "" {
				s.raw.Reset()
				continue // stray blank line or comment-only block
			}
			ev.Data = bytes.Join(data, []byte("\n"))
			return ev, s.raw.Bytes(), nil
		}
		data = appendField(data, &ev, trimmed)
	}
}

func appendField(data [][]byte, ev *sseEvent, line []byte) [][]byte {
	if len(line) == 0 || line[0] == ':' {
		// Nothing (a body ending in a lone "\r") or a comment (keep-alive).
		return data
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "data":
		return append(data, append([]byte(nil), value...))
	case "event":
		ev.Event = string(value)
	}
	return data
}

// assembler rebuilds one completion from the chunks of a stream, so a
// streamed miss can be cached and later served to stream and non-stream
// requests alike.
type assembler struct {
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

func newAssembler(chat bool) *assembler {
	return &assembler{chat: chat, choices: map[int]*choiceAcc{}}
}

type streamChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Usage             json.RawMessage `json:"usage"`
	Choices           []struct {
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

// add feeds one data payload (not [DONE]).
func (a *assembler) add(data []byte) error {
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

// text is everything generated so far for choice 0 (the partial answer a
// resumed stream continues from).
func (a *assembler) text() string {
	c := a.choices[0]
	if c == nil {
		return ""
	}
	if a.chat {
		return c.content.String()
	}
	return c.text.String()
}

// complete reports whether the stream finished cleanly: [DONE] seen and
// every choice has a finish reason.
func (a *assembler) complete() bool {
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

// completion renders the assembled non-stream body.
func (a *assembler) completion() ([]byte, error) {
	idx := make([]int, 0, len(a.choices))
	for i := range a.choices {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	choices := make([]map[string]any, 0, len(idx))
	for _, i := range idx {
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
				ti := make([]int, 0, len(c.tools))
				for k := range c.tools {
					ti = append(ti, k)
				}
				sort.Ints(ti)
				calls := make([]map[string]any, 0, len(ti))
				for _, k := range ti {
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
