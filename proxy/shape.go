package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
)

// errShape reports a body scanShape cannot read; the caller decodes it with
// encoding/json for the error message.
var errShape = errors.New("scan request shape")

// scanShape fills the fields of shape from the top level of a JSON object
// body, skipping every other value without decoding it. With the cache off
// nothing else of the body is needed (the upstream validates its own API),
// and in the miss-path profile encoding/json's reflection-driven decode of
// these three fields was 7 % of the request. Only string values with escapes
// and stream_options go through encoding/json.
func scanShape(body []byte, shape *requestShape) error {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return errShape
	}
	i++
	for {
		i = skipSpace(body, i)
		if i >= len(body) {
			return errShape
		}
		switch body[i] {
		case '}':
			if skipSpace(body, i+1) != len(body) {
				return errShape
			}
			return nil
		case ',':
			i++
			continue
		case '"':
		default:
			return errShape
		}
		kEnd := skipString(body, i)
		if kEnd < 0 {
			return errShape
		}
		key := body[i+1 : kEnd-1]
		i = skipSpace(body, kEnd)
		if i >= len(body) || body[i] != ':' {
			return errShape
		}
		i = skipSpace(body, i+1)
		vEnd := skipValue(body, i)
		if vEnd < 0 {
			return errShape
		}
		v := body[i:vEnd]
		switch string(key) {
		case "model":
			if len(v) < 2 || v[0] != '"' {
				return errShape
			}
			if bytes.IndexByte(v, '\\') >= 0 {
				if err := json.Unmarshal(v, &shape.Model); err != nil {
					return errShape
				}
			} else {
				shape.Model = string(v[1 : len(v)-1])
			}
		case "stream":
			switch string(v) {
			case "true":
				shape.Stream = true
			case "false", "null":
				shape.Stream = false
			default:
				return errShape
			}
		case "stream_options":
			if err := json.Unmarshal(v, &shape.StreamOptions); err != nil {
				return errShape
			}
		}
		i = vEnd
	}
}
