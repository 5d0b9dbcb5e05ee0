package proxy

import (
	"io"

	"github.com/breakwater-dev/breakwater/proxy/flow"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// The SSE reader moved to proxy/flow; the tests here keep its names.
type sseEvent = wire.Event

type sseReader struct{ *flow.SSEReader }

func newSSEReader(r io.Reader) *sseReader { return &sseReader{flow.NewSSEReader(r)} }

func newBoundedSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{flow.NewBoundedSSEReader(r, max)}
}

func (s *sseReader) next() (sseEvent, []byte, error) { return s.Next() }

var errEventTooLarge = flow.ErrEventTooLarge
