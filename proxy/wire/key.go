package wire

import "github.com/breakwater-dev/breakwater/cache"

// Key is what a Format's key function reads of a request: the cache's own
// key (exact key, fingerprint, query, end user), and the fields the flow
// routes and streams by, which the cache never reads. The flow takes them
// from here rather than decoding the body again: encoding/json matches
// struct fields case-insensitively, so a second decode would read "MODEL"
// where the key read "model" (cache.DecodeObject).
type Key struct {
	cache.Key
	// Model is the model the client asked for.
	Model string
	// Temperature is the request's temperature; nil when the request does
	// not set it (the upstream default applies, 1 for OpenAI).
	Temperature *float64
	// Stream reports whether the client asked for a streamed answer. It is
	// not part of the exact key: streamed and non-streamed requests share
	// entries.
	Stream bool
	// IncludeUsage is stream_options.include_usage: a streamed answer ends
	// with a usage chunk. Not part of the exact key, like Stream.
	IncludeUsage bool
}
