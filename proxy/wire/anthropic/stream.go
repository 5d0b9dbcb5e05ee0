package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// messageStream follows one Anthropic Messages event stream (message_start,
// content_block_start/delta/stop, message_delta, message_stop, ping, error)
// and rebuilds the message it describes.
type messageStream struct {
	msg     map[string]json.RawMessage // message_start's message
	blocks  []*streamBlock
	delta   map[string]json.RawMessage // message_delta's delta (stop_reason, ...)
	usage   map[string]json.RawMessage // message_start's usage, updated by message_delta
	stopped bool                       // message_stop seen

	// A continuation on another target (see beginResume): its preamble is
	// dropped and its block indexes are shifted behind the client's.
	resuming  bool
	base      int    // local index of the continuation's block 0
	continues bool   // its block 0 continues our open text block
	dropSpace string // whitespace the prefill lost, dropped once from its text
}

// streamBlock is one content block being assembled.
type streamBlock struct {
	start     map[string]json.RawMessage // content_block_start's content_block
	typ       string
	text      strings.Builder
	thinking  strings.Builder
	signature strings.Builder
	input     strings.Builder // input_json_delta fragments
	citations []json.RawMessage
	done      bool
}

func newMessageStream() *messageStream { return &messageStream{} }

// streamEvent is the part of every event the assembler reads.
type streamEvent struct {
	Type         string                     `json:"type"`
	Index        *int                       `json:"index"`
	Message      map[string]json.RawMessage `json:"message"`
	ContentBlock map[string]json.RawMessage `json:"content_block"`
	Delta        json.RawMessage            `json:"delta"`
	Usage        map[string]json.RawMessage `json:"usage"`
	Error        json.RawMessage            `json:"error"`
}

func (s *messageStream) Feed(ev wire.Event, raw []byte, _ bool) ([]byte, bool, error) {
	if len(ev.Data) == 0 {
		return nil, false, nil
	}
	var e streamEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return nil, false, fmt.Errorf("parse stream event: %w", err)
	}
	if e.Type == "" {
		e.Type = ev.Event
	}
	switch e.Type {
	case "error":
		// An error after the 200 (overloaded_error mid-stream): a cut.
		return nil, false, wire.UpstreamErrorEvent(ev.Data)
	case "message_start":
		if s.resuming {
			return nil, false, nil // the client has its message_start
		}
		s.msg = e.Message
		s.usage = map[string]json.RawMessage{}
		var u map[string]json.RawMessage
		if json.Unmarshal(e.Message["usage"], &u) == nil {
			s.usage = u
		}
		return raw, false, nil
	case "content_block_start", "content_block_delta", "content_block_stop":
		if e.Index == nil {
			return nil, false, fmt.Errorf("parse stream event: %s without an index", e.Type)
		}
		return s.block(e, ev.Data, raw)
	case "message_delta":
		if s.delta == nil {
			s.delta = map[string]json.RawMessage{}
		}
		var d map[string]json.RawMessage
		if err := json.Unmarshal(e.Delta, &d); err != nil {
			return nil, false, fmt.Errorf("parse stream event: %w", err)
		}
		for k, v := range d {
			s.delta[k] = v
		}
		if s.usage == nil {
			s.usage = map[string]json.RawMessage{}
		}
		for k, v := range e.Usage {
			if !bytes.Equal(v, []byte("null")) {
				s.usage[k] = v
			}
		}
		return raw, false, nil
	case "message_stop":
		s.stopped = true
		return raw, true, nil
	}
	// ping and event types this version does not know: relayed as they are.
	return raw, false, nil
}

// block applies a content block event, shifting its index for a
// continuation.
func (s *messageStream) block(e streamEvent, data, raw []byte) ([]byte, bool, error) {
	idx := *e.Index
	if s.resuming {
		if s.continues && idx == 0 && e.Type == "content_block_start" {
			return nil, false, nil // our open text block goes on
		}
		idx += s.base
	}
	if e.Type == "content_block_start" {
		if idx != len(s.blocks) {
			return nil, false, fmt.Errorf("parse stream event: block %d started after %d blocks", idx, len(s.blocks))
		}
		b := &streamBlock{start: e.ContentBlock}
		_ = json.Unmarshal(e.ContentBlock["type"], &b.typ)
		s.blocks = append(s.blocks, b)
	} else if idx < 0 || idx >= len(s.blocks) {
		return nil, false, fmt.Errorf("parse stream event: %s for block %d of %d", e.Type, idx, len(s.blocks))
	}
	b := s.blocks[idx]
	switch e.Type {
	case "content_block_delta":
		var d struct {
			Type        string          `json:"type"`
			Text        string          `json:"text"`
			PartialJSON string          `json:"partial_json"`
			Thinking    string          `json:"thinking"`
			Signature   string          `json:"signature"`
			Citation    json.RawMessage `json:"citation"`
		}
		if err := json.Unmarshal(e.Delta, &d); err != nil {
			return nil, false, fmt.Errorf("parse stream event: %w", err)
		}
		switch d.Type {
		case "text_delta":
			if s.dropSpace != "" {
				t := strings.TrimPrefix(d.Text, s.dropSpace)
				s.dropSpace = ""
				if t != d.Text {
					d.Text = t
					e.Delta = mustJSON(map[string]string{"type": "text_delta", "text": t})
					raw = nil // re-encoded below
				}
			}
			b.text.WriteString(d.Text)
		case "input_json_delta":
			b.input.WriteString(d.PartialJSON)
		case "thinking_delta":
			b.thinking.WriteString(d.Thinking)
		case "signature_delta":
			b.signature.WriteString(d.Signature)
		case "citations_delta":
			b.citations = append(b.citations, d.Citation)
		}
	case "content_block_stop":
		b.done = true
	}
	if idx == *e.Index && raw != nil {
		return raw, false, nil
	}
	return reencode(e.Type, data, idx, e.Delta)
}

// reencode rewrites a block event (its data) with a new index and delta.
func reencode(typ string, data []byte, idx int, delta json.RawMessage) ([]byte, bool, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, false, fmt.Errorf("parse stream event: %w", err)
	}
	m["index"] = mustJSON(idx)
	if delta != nil {
		m["delta"] = mustJSON(delta)
	}
	return wire.EventBytes(typ, mustJSON(m)), false, nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// beginResume prepares for a continuation whose prefill lost the trailing
// whitespace ws: its block 0 continues our last block when that is open
// text, else its blocks follow ours.
func (s *messageStream) beginResume(ws string) {
	s.resuming = true
	s.dropSpace = ws
	s.base = len(s.blocks)
	s.continues = false
	if n := len(s.blocks); n > 0 && s.blocks[n-1].typ == "text" && !s.blocks[n-1].done {
		s.base, s.continues = n-1, true
	}
}

// textOnly is the text of the answer so far, false when it holds anything
// but text blocks (thinking, tool use: not continued by a prefill).
func (s *messageStream) textOnly() (string, bool) {
	var b strings.Builder
	for _, bl := range s.blocks {
		if bl.typ != "text" {
			return "", false
		}
		b.WriteString(blockText(bl))
	}
	return b.String(), true
}

func blockText(b *streamBlock) string {
	var start string
	_ = json.Unmarshal(b.start["text"], &start)
	return start + b.text.String()
}

// FinishedAtEOF: a Messages stream ends with message_stop, nothing else.
func (s *messageStream) FinishedAtEOF() bool { return s.stopped }

func (s *messageStream) Partial() string {
	var b strings.Builder
	for _, bl := range s.blocks {
		if bl.typ == "text" {
			b.WriteString(blockText(bl))
		}
	}
	return b.String()
}

func (s *messageStream) Complete() bool {
	if !s.stopped || s.msg == nil {
		return false
	}
	for _, b := range s.blocks {
		if !b.done {
			return false
		}
	}
	var reason string
	return json.Unmarshal(s.delta["stop_reason"], &reason) == nil && finishedStopReason(reason)
}

// Body renders the message as the non-stream API returns it.
func (s *messageStream) Body() ([]byte, error) {
	if s.msg == nil {
		return nil, errors.New("render message: no message_start")
	}
	out := make(map[string]json.RawMessage, len(s.msg)+2)
	for k, v := range s.msg {
		out[k] = v
	}
	content := make([]json.RawMessage, 0, len(s.blocks))
	for _, b := range s.blocks {
		rb, err := b.render()
		if err != nil {
			return nil, err
		}
		content = append(content, rb)
	}
	out["content"] = mustJSON(content)
	for k, v := range s.delta {
		out[k] = v
	}
	out["usage"] = mustJSON(s.usage)
	return json.Marshal(out)
}

func (b *streamBlock) render() (json.RawMessage, error) {
	m := make(map[string]json.RawMessage, len(b.start)+1)
	for k, v := range b.start {
		m[k] = v
	}
	switch b.typ {
	case "text":
		m["text"] = mustJSON(blockText(b))
		if len(b.citations) > 0 {
			var cs []json.RawMessage
			_ = json.Unmarshal(b.start["citations"], &cs)
			m["citations"] = mustJSON(append(cs, b.citations...))
		}
	case "thinking":
		m["thinking"] = mustJSON(b.thinking.String())
		m["signature"] = mustJSON(b.signature.String())
	default:
		if b.input.Len() > 0 {
			in := []byte(b.input.String())
			if !json.Valid(in) {
				return nil, fmt.Errorf("render message: tool input is not JSON: %s", wire.Truncate(string(in), 100))
			}
			m["input"] = in
		}
	}
	return mustJSON(m), nil
}

// replayMessage writes a stored message as the complete event stream the
// API sends: message_start (usage included), each block as start, deltas and
// stop, message_delta with the stop reason and usage, message_stop.
func replayMessage(w io.Writer, flush func(), stored []byte) error {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(stored, &msg); err != nil {
		return fmt.Errorf("replay cached message: %w", err)
	}
	var content []map[string]json.RawMessage
	if err := json.Unmarshal(msg["content"], &content); err != nil {
		return fmt.Errorf("replay cached message: %w", err)
	}
	send := func(typ string, ev map[string]any) error {
		ev["type"] = typ
		return wire.WriteJSONEvent(w, flush, typ, ev)
	}
	start := make(map[string]json.RawMessage, len(msg))
	for k, v := range msg {
		start[k] = v
	}
	start["content"] = json.RawMessage("[]")
	delta := map[string]json.RawMessage{}
	for _, k := range []string{"stop_reason", "stop_sequence", "stop_details", "container"} {
		if v, ok := msg[k]; ok {
			delta[k] = v
			start[k] = json.RawMessage("null")
		}
	}
	if err := send("message_start", map[string]any{"message": start}); err != nil {
		return err
	}
	for i, block := range content {
		if err := replayBlock(w, flush, send, i, block); err != nil {
			return err
		}
	}
	usage := msg["usage"]
	if usage == nil {
		usage = json.RawMessage("{}")
	}
	if err := send("message_delta", map[string]any{"delta": delta, "usage": usage}); err != nil {
		return err
	}
	return send("message_stop", map[string]any{})
}

// replayBlock sends one content block the way the API streams its type;
// block types without deltas arrive whole in their start event. A text's or
// thinking's pieces are written by wire.Deltas, with the bytes send gives
// the same event.
func replayBlock(w io.Writer, flush func(), send func(string, map[string]any) error, i int, block map[string]json.RawMessage) error {
	var typ string
	_ = json.Unmarshal(block["type"], &typ)
	start := make(map[string]json.RawMessage, len(block))
	for k, v := range block {
		start[k] = v
	}
	var deltas, after []map[string]any
	var pieces []string
	var field string // the pieces' field: "text" or "thinking"
	switch typ {
	case "text":
		var text string
		_ = json.Unmarshal(block["text"], &text)
		start["text"] = json.RawMessage(`""`)
		var cites []json.RawMessage
		if json.Unmarshal(block["citations"], &cites) == nil && len(cites) > 0 {
			start["citations"] = json.RawMessage("[]")
			for _, c := range cites {
				deltas = append(deltas, map[string]any{"type": "citations_delta", "citation": c})
			}
		}
		pieces, field = wire.Words(text), "text"
	case "thinking":
		var thinking, sig string
		_ = json.Unmarshal(block["thinking"], &thinking)
		_ = json.Unmarshal(block["signature"], &sig)
		start["thinking"], start["signature"] = json.RawMessage(`""`), json.RawMessage(`""`)
		pieces, field = wire.Words(thinking), "thinking"
		after = append(after, map[string]any{"type": "signature_delta", "signature": sig})
	case "tool_use", "server_tool_use", "mcp_tool_use":
		if in := block["input"]; len(in) > 0 {
			var compact bytes.Buffer
			if json.Compact(&compact, in) == nil && compact.String() != "{}" {
				start["input"] = json.RawMessage("{}")
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": compact.String()})
			}
		}
	}
	if err := send("content_block_start", map[string]any{"index": i, "content_block": start}); err != nil {
		return err
	}
	for _, d := range deltas {
		if err := send("content_block_delta", map[string]any{"index": i, "delta": d}); err != nil {
			return err
		}
	}
	if len(pieces) > 0 {
		d := wire.Deltas{
			Head: append(wire.AppendEventHead(nil, "content_block_delta"), `{"delta":{"`+field+`":`...),
			Tail: []byte(`,"type":"` + field + `_delta"},"index":` + strconv.Itoa(i) + `,"type":"content_block_delta"}` + "\n\n"),
		}
		if err := d.WriteAll(w, flush, pieces); err != nil {
			return err
		}
	}
	for _, d := range after {
		if err := send("content_block_delta", map[string]any{"index": i, "delta": d}); err != nil {
			return err
		}
	}
	return send("content_block_stop", map[string]any{"index": i})
}
