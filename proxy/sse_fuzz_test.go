package proxy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// FuzzSSEReader reads arbitrary upstream stream bodies, unbounded and with a
// small event bound (as the proxy reads them): the reader must end (every
// event consumes input), never return more raw bytes than it read nor an
// event above the bound, and the assembler must take any data without
// panicking.
func FuzzSSEReader(f *testing.F) {
	for _, name := range []string{"testdata/replay-golden.sse", "testdata/stream-toolcalls.sse"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\n: keep-alive\n\nevent: error\ndata: {\"error\":{}}\n\ndata: [DONE]"))
	f.Add([]byte("data: a\ndata: b\nid: 1\nretry: 10\n\n\n\ndata"))
	f.Fuzz(func(t *testing.T, body []byte) {
		readAll(t, body, newSSEReader(bytes.NewReader(body)), 0)
		readAll(t, body, newBoundedSSEReader(bytes.NewReader(body), 64), 64)
	})
}

func readAll(t *testing.T, body []byte, rd *sseReader, max int) {
	{
		asm := newAssembler(true)
		total := 0
		for events := 0; ; events++ {
			if events > len(body)+1 {
				t.Fatalf("%d events from %d bytes", events, len(body))
			}
			ev, raw, err := rd.next()
			if err != nil {
				if max > 0 && errors.Is(err, errEventTooLarge) {
					return
				}
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("next: %v", err)
				}
				return
			}
			if max > 0 && len(raw) > max {
				t.Fatalf("event of %d raw bytes through a bound of %d", len(raw), max)
			}
			total += len(raw)
			if total > len(body) {
				t.Fatalf("raw bytes %d exceed the input's %d", total, len(body))
			}
			if len(ev.Data) > len(body) {
				t.Fatalf("event data %d bytes from a %d-byte body", len(ev.Data), len(body))
			}
			_ = asm.add(ev.Data)
			_ = asm.text()
		}
	}
}
