package cache

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting, as encoding/json does (10000), so a body of
// brackets cannot exhaust the stack.
const maxJSONDepth = 10000

// DecodeObject is the one decoding of a request body that keys, routing and
// forwarding share. It is stricter than encoding/json in three ways, each of
// which would otherwise let two different bodies mean one thing to the cache
// and another to the upstream:
//
//   - field names match exactly: there is no struct and no case folding, so
//     "MODEL" is a field of its own, never "model";
//   - a duplicate field name in any object is refused: RFC 8259 §4 leaves
//     its meaning to the receiver ("unpredictable"), and the proxy, the
//     upstream and the key must not each pick a different copy;
//   - invalid UTF-8 and lone surrogate escapes (\ud800 without a low half,
//     \udc00 alone) are refused: encoding/json turns both into U+FFFD, which
//     made "zz\ud800zz" and "zz\ufffdzz" one key, and RFC 8259 §8.2 calls such
//     strings non-interoperable.
//
// Numbers are kept as their literal text (json.Number); the top-level value
// must be an object. Every refusal wraps ErrBadRequest.
//
// It is written here rather than taken from a library: encoding/json folds
// case and accepts all three, and encoding/json/v2, which would not, is
// still behind GOEXPERIMENT=jsonv2 in Go 1.26.
func DecodeObject(body []byte) (map[string]any, error) {
	if !utf8.Valid(body) {
		return nil, BadRequest("body is not valid UTF-8")
	}
	d := jsonDecoder{data: body}
	d.space()
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.space()
	if d.pos != len(d.data) {
		return nil, BadRequest("body is not valid JSON: data after the top-level value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, BadRequest("body must be a JSON object")
	}
	return obj, nil
}

// jsonDecoder is a recursive-descent parser of RFC 8259 JSON text.
type jsonDecoder struct {
	data  []byte
	pos   int
	depth int
}

func (d *jsonDecoder) fail(what string) error {
	return BadRequest(fmt.Sprintf("body is not valid JSON: %s at offset %d", what, d.pos))
}

func (d *jsonDecoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value() (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.fail("unexpected end of input")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	default:
		return nil, d.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (d *jsonDecoder) literal(word string) error {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return d.fail("invalid literal")
	}
	d.pos += len(word)
	return nil
}

func (d *jsonDecoder) enter() error {
	d.depth++
	if d.depth > maxJSONDepth {
		return d.fail("nesting deeper than 10000")
	}
	d.pos++ // the opening bracket
	d.space()
	return nil
}

func (d *jsonDecoder) object() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	obj := map[string]any{}
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return obj, nil
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.fail("expected a field name")
		}
		at := d.pos
		name, err := d.str()
		if err != nil {
			return nil, err
		}
		if _, dup := obj[name]; dup {
			d.pos = at
			return nil, d.fail(fmt.Sprintf("duplicate field %.60q", name))
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.fail("expected ':'")
		}
		d.pos++
		d.space()
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		obj[name] = v
		if end, err := d.separator('}'); err != nil {
			return nil, err
		} else if end {
			return obj, nil
		}
	}
}

func (d *jsonDecoder) array() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	arr := []any{}
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return arr, nil
	}
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		if end, err := d.separator(']'); err != nil {
			return nil, err
		} else if end {
			return arr, nil
		}
	}
}

// separator reads what follows a member or an element: a comma (end false),
// or the closing bracket, which leaves the container (end true).
func (d *jsonDecoder) separator(closing byte) (end bool, err error) {
	d.space()
	if d.pos >= len(d.data) {
		return false, d.fail("unexpected end of input")
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		d.space()
		return false, nil
	case closing:
		d.pos++
		d.depth--
		return true, nil
	}
	return false, d.fail("expected ',' or '" + string(closing) + "'")
}

// number accepts exactly the RFC 8259 §6 grammar:
// -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?
func (d *jsonDecoder) number() (any, error) {
	start := d.pos
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.data[d.pos] == '-' {
		d.pos++
	}
	if d.pos < len(d.data) && d.data[d.pos] == '0' {
		d.pos++
	} else if digits() == 0 {
		return nil, d.fail("invalid number")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, d.fail("invalid number")
		}
	}
	return json.Number(d.data[start:d.pos]), nil
}

// str decodes a string starting at its opening quote.
func (d *jsonDecoder) str() (string, error) {
	d.pos++
	start := d.pos
	// Fast path: no escapes.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := string(d.data[start:d.pos])
			d.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", d.fail("control character in string")
		}
		d.pos++
	}
	buf := append([]byte(nil), d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(buf), nil
		case c < 0x20:
			return "", d.fail("control character in string")
		case c != '\\':
			buf = append(buf, c)
			d.pos++
			continue
		}
		if d.pos+1 >= len(d.data) {
			return "", d.fail("unexpected end of input")
		}
		esc := d.data[d.pos+1]
		d.pos += 2
		switch esc {
		case '"', '\\', '/':
			buf = append(buf, esc)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", d.fail(`invalid \u escape`)
			}
			switch {
			case r >= 0xdc00 && r < 0xe000:
				return "", d.fail(fmt.Sprintf(`lone surrogate escape \u%04x`, r))
			case r >= 0xd800 && r < 0xdc00:
				if d.pos+1 >= len(d.data) || d.data[d.pos] != '\\' || d.data[d.pos+1] != 'u' {
					return "", d.fail(fmt.Sprintf(`lone surrogate escape \u%04x`, r))
				}
				d.pos += 2
				lo, ok := d.hex4()
				if !ok {
					return "", d.fail(`invalid \u escape`)
				}
				if lo < 0xdc00 || lo >= 0xe000 {
					return "", d.fail(fmt.Sprintf(`lone surrogate escape \u%04x`, r))
				}
				r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			d.pos -= 2
			return "", d.fail(fmt.Sprintf("invalid escape %q", "\\"+string(rune(esc))))
		}
	}
	return "", d.fail("unterminated string")
}

// hex4 reads four hex digits.
func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	d.pos += 4
	return r, true
}
