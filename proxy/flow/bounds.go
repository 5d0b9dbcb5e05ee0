package flow

import (
	"errors"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// errEventTooLarge is the cause of a stream cut by MaxEventBytes.
var errEventTooLarge = errors.New("an upstream stream event is larger than stream.max_event_bytes")

// errStreamTooLarge is the cause of a stream cut by MaxStreamBytes.
var errStreamTooLarge = errors.New("the upstream stream is longer than stream.max_bytes")

// limitOf names the setting whose bound cut a stream, "" when none did.
func limitOf(cut error) string {
	switch {
	case errors.Is(cut, errStreamTooLarge):
		return "stream.max_bytes"
	case errors.Is(cut, errEventTooLarge):
		return "stream.max_event_bytes"
	case errors.Is(cut, upstream.ErrDeadline):
		return "stream.max_duration"
	}
	return ""
}

// resumable reports whether a cut stream may be continued on another target:
// not when a bound cut it (the continuation would cross the same bound).
func resumable(cut error) bool { return limitOf(cut) == "" }
