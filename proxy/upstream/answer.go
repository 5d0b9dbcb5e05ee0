package upstream

import (
	"errors"
	"io"
)

// DefaultMaxAnswerBytes is the largest non-stream answer Do buffers; the rest
// of a longer one is handed over as Response.Rest, read as it arrives.
const DefaultMaxAnswerBytes = 4 << 20

// ErrDeadline ends the body of a stream (or of an answer longer than
// MaxAnswerBytes) still arriving when the request deadline passes.
var ErrDeadline = errors.New("the request deadline (retry.deadline) passed while the answer was still arriving")

// readCapped reads rc up to limit bytes (negative: no limit). over reports
// that rc holds more: b then has limit+1 bytes and rc is left open.
func readCapped(rc io.Reader, limit, size int64) (b []byte, over bool, err error) {
	if limit < 0 {
		b, err = readSized(rc, size)
		return b, false, err
	}
	b, err = readSized(io.LimitReader(rc, limit+1), min(size, limit+1))
	return b, err == nil && int64(len(b)) > limit, err
}
