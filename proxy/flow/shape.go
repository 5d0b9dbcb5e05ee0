package flow

import (
	"bytes"
	"errors"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// errShape reports a body scanShape does not read; the caller then builds
// the Format's key with its strict decoding (cache.DecodeObject), which
// answers what is wrong.
var errShape = errors.New("scan request shape")

// scanShape fills the fields of shape from the top level of a JSON object
// body, skipping every other value without decoding it. With the cache off
// nothing else of the body is needed (the upstream validates its own API),
// and in the miss-path profile encoding/json's reflection-driven decode of
// these three fields was 7 % of the request. It reads field names exactly, as
// the key does; a repeated field, or a model with escapes, is left to the
// strict decoding, so routing never reads what the key would not.
// Not cache.DecodeObject: with the cache off no key is built, and three
// fields do not pay for decoding every value.
func scanShape(body []byte, shape *requestShape) error {
	var seen [3]bool
	ok := wire.TopFields(body, func(key []byte, vStart, vEnd int) bool {
		v := body[vStart:vEnd]
		switch string(key) {
		case "model":
			if seen[0] || len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
				return false
			}
			seen[0] = true
			shape.Model = string(v[1 : len(v)-1])
		case "stream":
			if seen[1] {
				return false
			}
			seen[1] = true
			switch string(v) {
			case "true":
				shape.Stream = true
			case "false", "null":
				shape.Stream = false
			default:
				return false
			}
		case "stream_options":
			if seen[2] {
				return false
			}
			seen[2] = true
			so, err := cache.DecodeObject(v)
			if err != nil && string(v) != "null" {
				return false
			}
			shape.IncludeUsage, _ = so["include_usage"].(bool)
		}
		return true
	})
	if !ok {
		return errShape
	}
	return nil
}
