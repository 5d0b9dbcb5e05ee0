package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// maxResponseBytes bounds what the Responses assembler keeps of one stream
// (the final response object and the finished output items). A larger
// answer is relayed whole but not stored.
const maxResponseBytes = 16 << 20

// responsesStream follows one Responses API stream. The API sends typed
// events (response.created, response.output_item.added, ...
// response.output_text.delta, ... response.completed), each with a
// sequence_number, and no [DONE]: the stream ends with response.completed,
// response.incomplete or response.failed, or with an "error" event. The
// final event carries the whole response object, which is what is stored:
// the same body a non-stream request gets.
type responsesStream struct {
	terminal string          // the type of the event that ended the stream
	response json.RawMessage // the response object of the terminal event
	items    map[int64]json.RawMessage
	text     strings.Builder // output_text so far, for Partial
	size     int
	tooBig   bool
	id       string // the response's id, from the first event carrying it
}

func newResponsesStream() *responsesStream {
	return &responsesStream{items: map[int64]json.RawMessage{}}
}

// responsesEvent is the part of a stream event the assembler reads. Field
// names are matched case-insensitively by encoding/json; the provider sends
// them in lower case only, and nothing a client sends is read here.
type responsesEvent struct {
	Type        string          `json:"type"`
	Response    json.RawMessage `json:"response"`
	Item        json.RawMessage `json:"item"`
	OutputIndex int64           `json:"output_index"`
	Delta       string          `json:"delta"`
	Error       json.RawMessage `json:"error"`
}

func (s *responsesStream) Feed(ev wire.Event, raw []byte, _ bool) ([]byte, bool, error) {
	if len(ev.Data) == 0 {
		return nil, false, nil
	}
	if ev.Done() {
		// Not part of the Responses API, but some compatible servers end
		// with it; the stream is over either way.
		return raw, true, nil
	}
	var e responsesEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return nil, false, fmt.Errorf("parse responses stream event: %w", err)
	}
	if e.Type == "" && ev.Event != "" {
		e.Type = ev.Event
	}
	if s.id == "" && len(e.Response) > 0 {
		// response.created carries it first
		// (https://platform.openai.com/docs/api-reference/responses-streaming).
		var r struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(e.Response, &r) == nil {
			s.id = r.ID
		}
	}
	switch e.Type {
	case "response.completed", "response.incomplete", "response.failed":
		s.terminal = e.Type
		s.keep(&s.response, e.Response)
		return raw, true, nil
	case "error":
		// The provider's own error event goes to the client as it was sent;
		// the stream ends there and nothing is stored.
		s.terminal = e.Type
		return raw, true, nil
	case "response.output_item.done":
		var item json.RawMessage
		s.keep(&item, e.Item)
		if item != nil {
			s.items[e.OutputIndex] = item
		}
	case "response.output_text.delta":
		if s.text.Len() < maxResponseBytes {
			s.text.WriteString(e.Delta)
		}
	}
	if e.Type == "" && len(e.Error) > 0 && !bytes.Equal(e.Error, []byte("null")) {
		// An untyped {"error": ...} payload: a compatible server failing.
		s.terminal = "error"
		return raw, true, nil
	}
	return raw, false, nil
}

// keep copies v into *dst while the assembler stays within its bound.
func (s *responsesStream) keep(dst *json.RawMessage, v json.RawMessage) {
	if len(v) == 0 || s.tooBig {
		return
	}
	s.size += len(v)
	if s.size > maxResponseBytes {
		s.tooBig = true
		return
	}
	*dst = append(json.RawMessage(nil), v...)
}

func (s *responsesStream) FinishedAtEOF() bool { return s.terminal != "" }

func (s *responsesStream) Partial() string { return s.text.String() }

// Complete: the stream ended with response.completed, and its response says
// so too (finished checks the body again before it is stored).
func (s *responsesStream) Complete() bool {
	return s.terminal == "response.completed" && !s.tooBig && len(s.response) > 0
}

// Body is the response object of response.completed. Should the provider
// leave its output out (or null), the output is rebuilt from the
// response.output_item.done events, in output_index order.
func (s *responsesStream) Body() ([]byte, error) {
	if !s.Complete() {
		return nil, errors.New("assemble response: the stream did not complete")
	}
	f, err := exactFields(s.response)
	if err != nil {
		return nil, fmt.Errorf("assemble response: %w", err)
	}
	if out, ok := f["output"]; ok && !bytes.Equal(bytes.TrimSpace(out), []byte("null")) {
		return s.response, nil
	}
	idx := make([]int64, 0, len(s.items))
	for i := range s.items {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	items := make([]json.RawMessage, 0, len(idx))
	for _, i := range idx {
		items = append(items, s.items[i])
	}
	f["output"], err = json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("assemble response: %w", err)
	}
	return json.Marshal(f)
}

// replayResponse writes a stored response as the event stream the Responses
// API sends for it: response.created and response.in_progress (the response
// with status in_progress and no output yet), for every output item its
// output_item.added, the deltas of its text, refusal, arguments or
// reasoning summary and their done events, and output_item.done, then
// response.completed with the stored response. sequence_number counts from
// 0. Every id (the response's, each item's) is the provider's.
func replayResponse(w io.Writer, flush func(), stored []byte) error {
	resp, err := exactFields(stored)
	if err != nil {
		return fmt.Errorf("replay cached response: %w", err)
	}
	var output []map[string]json.RawMessage
	if o := resp["output"]; len(o) > 0 {
		if err := json.Unmarshal(o, &output); err != nil {
			return fmt.Errorf("replay cached response: output: %w", err)
		}
	}
	r := &eventWriter{w: w, flush: flush}
	pending := make(map[string]json.RawMessage, len(resp))
	for k, v := range resp {
		pending[k] = v
	}
	pending["status"] = json.RawMessage(`"in_progress"`)
	pending["output"] = json.RawMessage(`[]`)
	for _, k := range []string{"usage", "completed_at", "incomplete_details", "error"} {
		if _, ok := pending[k]; ok {
			pending[k] = json.RawMessage(`null`)
		}
	}
	r.send("response.created", "response", pending)
	r.send("response.in_progress", "response", pending)
	for i, item := range output {
		replayItem(r, int64(i), item)
	}
	r.send("response.completed", "response", json.RawMessage(stored))
	return r.err
}

// replayItem sends the events of one output item.
func replayItem(r *eventWriter, index int64, item map[string]json.RawMessage) {
	typ, id := str(item, "type"), str(item, "id")
	added := make(map[string]json.RawMessage, len(item))
	for k, v := range item {
		added[k] = v
	}
	if _, ok := added["status"]; ok {
		added["status"] = json.RawMessage(`"in_progress"`)
	}
	at := func(fields ...any) []any { return append([]any{"item_id", id, "output_index", index}, fields...) }
	switch typ {
	case "message":
		content := objects(item, "content")
		added["content"] = json.RawMessage(`[]`)
		r.send("response.output_item.added", "output_index", index, "item", added)
		for j, part := range content {
			ci := int64(j)
			switch str(part, "type") {
			case "output_text":
				text := str(part, "text")
				logprobs := orEmpty(part["logprobs"])
				r.send("response.content_part.added", at("content_index", ci,
					"part", map[string]any{"type": "output_text", "text": "", "annotations": json.RawMessage(`[]`), "logprobs": json.RawMessage(`[]`)})...)
				r.deltas("response.output_text.delta", wire.Words(text), at("content_index", ci)...)
				r.send("response.output_text.done", at("content_index", ci, "text", text, "logprobs", logprobs)...)
			case "refusal":
				refusal := str(part, "refusal")
				r.send("response.content_part.added", at("content_index", ci, "part", map[string]any{"type": "refusal", "refusal": ""})...)
				r.send("response.refusal.delta", at("content_index", ci, "delta", refusal)...)
				r.send("response.refusal.done", at("content_index", ci, "refusal", refusal)...)
			default:
				r.send("response.content_part.added", at("content_index", ci, "part", part)...)
			}
			r.send("response.content_part.done", at("content_index", ci, "part", part)...)
		}
	case "function_call":
		args := str(item, "arguments")
		added["arguments"] = json.RawMessage(`""`)
		r.send("response.output_item.added", "output_index", index, "item", added)
		r.send("response.function_call_arguments.delta", at("delta", args)...)
		r.send("response.function_call_arguments.done", at("arguments", args, "name", item["name"])...)
	case "reasoning":
		added["summary"] = json.RawMessage(`[]`)
		r.send("response.output_item.added", "output_index", index, "item", added)
		for k, part := range objects(item, "summary") {
			si := int64(k)
			text := str(part, "text")
			r.send("response.reasoning_summary_part.added", at("summary_index", si, "part", map[string]any{"type": "summary_text", "text": ""})...)
			r.send("response.reasoning_summary_text.delta", at("summary_index", si, "delta", text)...)
			r.send("response.reasoning_summary_text.done", at("summary_index", si, "text", text)...)
			r.send("response.reasoning_summary_part.done", at("summary_index", si, "part", part)...)
		}
	default:
		// Built-in tool calls and other items: announced and finished whole.
		r.send("response.output_item.added", "output_index", index, "item", added)
	}
	r.send("response.output_item.done", "output_index", index, "item", item)
}

// str is m[key] as a JSON string: "" when absent or not a string.
func str(m map[string]json.RawMessage, key string) string {
	var s string
	_ = json.Unmarshal(m[key], &s)
	return s
}

// objects is m[key] as a JSON array of objects: nil when absent or not one.
func objects(m map[string]json.RawMessage, key string) []map[string]json.RawMessage {
	var list []map[string]json.RawMessage
	_ = json.Unmarshal(m[key], &list)
	return list
}

func orEmpty(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || bytes.Equal(v, []byte("null")) {
		return json.RawMessage(`[]`)
	}
	return v
}

// eventWriter writes named SSE events with a running sequence_number and
// remembers the first write error.
type eventWriter struct {
	w     io.Writer
	flush func()
	seq   int64
	buf   bytes.Buffer
	err   error
}

// send writes one event of type typ whose fields follow as name, value
// pairs, in that order (type first, sequence_number last, as the API does).
func (r *eventWriter) send(typ string, fields ...any) {
	if r.err != nil {
		return
	}
	b := &r.buf
	b.Reset()
	if err := eventFields(b, typ, fields); err != nil {
		r.err = fmt.Errorf("replay cached response: %w", err)
		return
	}
	b.WriteString(`,"sequence_number":`)
	b.WriteString(strconv.FormatInt(r.seq, 10))
	b.WriteString("}\n\n")
	r.write(b.Bytes())
}

// deltas sends one delta event per piece (wire.Deltas), with fields before
// "delta" and an empty logprobs and the running sequence_number after it:
// the bytes send writes.
func (r *eventWriter) deltas(typ string, pieces []string, fields ...any) {
	if r.err != nil || len(pieces) == 0 {
		return
	}
	var head bytes.Buffer
	if err := eventFields(&head, typ, fields); err != nil {
		r.err = fmt.Errorf("replay cached response: %w", err)
		return
	}
	head.WriteString(`,"delta":`)
	d := wire.Deltas{Head: head.Bytes(), Tail: []byte("}\n\n")}
	seq := make([]byte, 0, 64)
	for _, p := range pieces {
		seq = strconv.AppendInt(append(seq[:0], `,"logprobs":[],"sequence_number":`...), r.seq, 10)
		r.seq++
		if err := d.Write(r.w, r.flush, p, seq); err != nil {
			r.err = err
			return
		}
	}
}

// write sends one encoded event and counts it; false once writing failed.
func (r *eventWriter) write(ev []byte) bool {
	r.seq++
	r.err = wire.WriteEvent(r.w, r.flush, ev)
	return r.err == nil
}

// eventFields encodes an event up to, not including, its sequence_number.
func eventFields(b *bytes.Buffer, typ string, fields []any) error {
	b.Grow(len(typ) + 256)
	b.Write(wire.AppendEventHead(b.AvailableBuffer(), typ))
	b.WriteString(`{"type":`)
	if err := writeJSONValue(b, typ); err != nil {
		return err
	}
	for i := 0; i+1 < len(fields); i += 2 {
		b.WriteString(",")
		if err := writeJSONValue(b, fields[i].(string)); err != nil {
			return err
		}
		b.WriteString(":")
		if err := writeJSONValue(b, fields[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func writeJSONValue(b *bytes.Buffer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		return json.Compact(b, raw)
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.Write(enc)
	return nil
}
