package wire

import (
	"encoding/json"
	"fmt"
	"io"
)

// The one SSE writer of the wire APIs. An event is its optional
// "event: <name>" line, one "data: " line and a blank line (WHATWG HTML,
// "Server-sent events", 9.2.6 Interpreting an event stream): every API's
// data is one line of compact JSON, so one data line always carries it.

// DoneEvent is the "data: [DONE]" event that ends an OpenAI Chat or
// completions stream (and that some compatible servers send after a
// Responses stream).
const DoneEvent = "data: [DONE]\n\n"

// AppendEventHead appends what opens an event whose data follows:
// "event: <name>\n" when name is set, then "data: ".
func AppendEventHead(dst []byte, name string) []byte {
	if name != "" {
		dst = append(append(append(dst, "event: "...), name...), '\n')
	}
	return append(dst, "data: "...)
}

// AppendEvent appends one whole event: its head, data and the blank line.
func AppendEvent(dst []byte, name string, data []byte) []byte {
	return append(append(AppendEventHead(dst, name), data...), "\n\n"...)
}

// EventBytes is one whole event in a new slice.
func EventBytes(name string, data []byte) []byte {
	return AppendEvent(make([]byte, 0, len(name)+len(data)+16), name, data)
}

// WriteEvent writes one raw event (whole, framing included), then flushes
// when flush is set.
func WriteEvent(w io.Writer, flush func(), ev []byte) error {
	if _, err := w.Write(ev); err != nil {
		return err
	}
	if flush != nil {
		flush()
	}
	return nil
}

// WriteJSONEvent writes v as the JSON data of one event named name ("" for
// an unnamed one), then flushes when flush is set.
func WriteJSONEvent(w io.Writer, flush func(), name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteEvent(w, flush, EventBytes(name, b))
}

// InterruptedMessage is the message of the event a Format's StreamError
// ends a cut stream with: why it was cut, and that it could not be resumed.
func InterruptedMessage(err error) string {
	return "breakwater: the answer stream was interrupted and could not be resumed: " + err.Error()
}

// UpstreamErrorEvent is the cut an upstream's error event makes: an error
// after the 200 (an "event: error", or an Anthropic "error" event), quoted
// up to 200 bytes.
func UpstreamErrorEvent(data []byte) error {
	return fmt.Errorf("the upstream sent an error event: %s", Truncate(string(data), 200))
}

// UpstreamErrorObject is the cut a data event whose object has "error" makes
// (how OpenAI's API and Gemini's fail mid-stream): that error, quoted up to
// 200 bytes.
func UpstreamErrorObject(obj []byte) error {
	return fmt.Errorf("the upstream sent an error mid-stream: %s", Truncate(string(obj), 200))
}

// Deltas writes the pieces of a replayed text as events that differ only in
// the piece: Head, the piece as a JSON string, any extra bytes, then Tail.
// The envelope is encoded once: a 1,000-token replay was ~20 to 40
// allocations a piece when every event was a map marshalled from scratch
// (BenchmarkReplay1000Tokens, BenchmarkReplayResponse1000Tokens,
// BenchmarkGeminiReplay1000Tokens). Each API builds Head and Tail so that
// the bytes are those json.Marshal gives its whole event (keys in sorted
// order), which the replay golden tests pin.
type Deltas struct {
	Head []byte // the event's framing (AppendEventHead) and its JSON up to the piece
	Tail []byte // its JSON after the piece, and the blank line
	buf  []byte
}

// Write writes the event of one piece, then flushes when flush is set.
func (d *Deltas) Write(w io.Writer, flush func(), piece string, extra ...[]byte) error {
	pb, err := json.Marshal(piece)
	if err != nil {
		return err
	}
	if d.buf == nil {
		d.buf = make([]byte, 0, len(d.Head)+len(d.Tail)+256)
	}
	d.buf = append(append(d.buf[:0], d.Head...), pb...)
	for _, e := range extra {
		d.buf = append(d.buf, e...)
	}
	d.buf = append(d.buf, d.Tail...)
	return WriteEvent(w, flush, d.buf)
}

// WriteAll writes one event per piece.
func (d *Deltas) WriteAll(w io.Writer, flush func(), pieces []string) error {
	for _, p := range pieces {
		if err := d.Write(w, flush, p); err != nil {
			return err
		}
	}
	return nil
}

// ResumeBody rebuilds a request body to continue a cut answer: the body's
// array of turns under field is given to edit, with the whole request, and
// replaced by the turns it returns (an error from edit, such as
// ErrNoResume, is returned as it is).
func ResumeBody(body []byte, field string, edit func(req map[string]json.RawMessage, turns []json.RawMessage) ([]json.RawMessage, error)) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("build resume request: %w", err)
	}
	var turns []json.RawMessage
	if err := json.Unmarshal(req[field], &turns); err != nil {
		return nil, fmt.Errorf("build resume request: %w", err)
	}
	turns, err := edit(req, turns)
	if err != nil {
		return nil, err
	}
	if req[field], err = json.Marshal(turns); err != nil {
		return nil, fmt.Errorf("build resume request: %w", err)
	}
	out, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("build resume request: %w", err)
	}
	return out, nil
}

// ContinueTurns is the usual ResumeBody edit: the partial answer as the
// model's turn, then the user's turn asking to continue it
// (ResumeInstruction), each rendered by turn(role, text) in the API's shape.
func ContinueTurns(model, partial string, turn func(role, text string) any) func(map[string]json.RawMessage, []json.RawMessage) ([]json.RawMessage, error) {
	return func(_ map[string]json.RawMessage, turns []json.RawMessage) ([]json.RawMessage, error) {
		for _, t := range []any{turn(model, partial), turn("user", ResumeInstruction)} {
			b, err := json.Marshal(t)
			if err != nil {
				return nil, fmt.Errorf("build resume request: %w", err)
			}
			turns = append(turns, b)
		}
		return turns, nil
	}
}
