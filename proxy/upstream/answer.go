package upstream

import (
	"errors"
	"io"
	"time"
)

// DefaultMaxAnswerBytes is the largest non-stream answer Do buffers; the rest
// of a longer one is handed over as Response.Rest, read as it arrives.
const DefaultMaxAnswerBytes = 4 << 20

// AnswerBound bounds the answers the caller buffers; a configuration file
// sets it in [server].
type AnswerBound struct {
	// MaxAnswerBytes is the largest non-stream upstream answer buffered
	// whole (and so cacheable and shared by coalesced requests); a longer
	// one comes back as Response.Rest, relayed to its client as it arrives
	// and never cached. Default 4 MiB (DefaultMaxAnswerBytes). 0 in the
	// file (a negative value here): no limit.
	MaxAnswerBytes int64 `toml:"max_answer_bytes" unit:"bytes" zero:"0: no limit"`
}

// StreamBound bounds a live stream's time; a configuration file sets it in
// [stream].
type StreamBound struct {
	// MaxStreamDuration bounds one stream, counted from the request; never
	// less than the request deadline (retry.deadline), which bounds the wait
	// for its first byte. Default 10m (DefaultMaxStreamDuration). 0 in the
	// file (a negative value here): the request deadline alone.
	MaxStreamDuration time.Duration `toml:"max_duration" zero:"0: retry.deadline alone"`
}

// DefaultAnswerBound and DefaultStreamBound are the bounds at their
// Default…, as a configuration file without the keys has them.
func DefaultAnswerBound() AnswerBound {
	return AnswerBound{MaxAnswerBytes: DefaultMaxAnswerBytes}
}

// DefaultStreamBound: see DefaultAnswerBound.
func DefaultStreamBound() StreamBound {
	return StreamBound{MaxStreamDuration: DefaultMaxStreamDuration}
}

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
