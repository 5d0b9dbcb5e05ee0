package upstream

import (
	"errors"
	"io"
	"time"
)

// DefaultMaxAnswerBytes is the largest non-stream answer Do buffers; the rest
// of a longer one is handed over as Response.Rest, read as it arrives.
const DefaultMaxAnswerBytes = 4 << 20

// DefaultMaxStreamDuration bounds a live stream, counted from the request:
// the request deadline (60 s by default) bounds the wait for its headers,
// but a long generation legitimately streams for minutes (a model writing
// 8k tokens at 40 tokens/s takes 200 s), so the body gets a bound of its own.
const DefaultMaxStreamDuration = 10 * time.Minute

// ErrDeadline ends the body of a stream (or of an answer longer than
// MaxAnswerBytes) still arriving when the request deadline passes.
var ErrDeadline = errors.New("the time limit passed while the answer was still arriving (stream.max_duration for a stream, retry.deadline for a long answer)")

// readCapped reads rc up to limit bytes (negative: no limit). over reports
// that rc holds more: b then has limit+1 bytes and rc is left open.
func readCapped(rc io.Reader, limit, size int64) (b []byte, over bool, err error) {
	if limit < 0 {
		b, err = ReadSized(rc, size)
		return b, false, err
	}
	b, err = ReadSized(io.LimitReader(rc, limit+1), min(size, limit+1))
	return b, err == nil && int64(len(b)) > limit, err
}
