package flow

import (
	"bufio"
	"bytes"
	"errors"
	"io"

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

// SSEReader reads the events of an SSE body, as the flow reads an
// upstream's stream (tests read the flow's own streams with it).
type SSEReader struct{ r *sseReader }

// NewSSEReader reads r's events without a bound on their size.
func NewSSEReader(r io.Reader) *SSEReader { return &SSEReader{newSSEReader(r)} }

// NewBoundedSSEReader refuses events longer than max bytes with
// ErrEventTooLarge.
func NewBoundedSSEReader(r io.Reader, max int) *SSEReader {
	return &SSEReader{newBoundedSSEReader(r, max)}
}

// Next returns the next event and its raw bytes (valid until the next
// call); io.EOF when the body ended between events.
func (s *SSEReader) Next() (wire.Event, []byte, error) { return s.r.next() }

// ErrEventTooLarge is the cause of a stream cut by MaxEventBytes.
var ErrEventTooLarge = errEventTooLarge
