package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ErrBadRequest is returned (wrapped) for a request body the upstream API
// would reject: invalid JSON, not an object, a missing model, a chat request
// without messages. The message after the sentinel says what to fix; the
// proxy answers it with 400.
var ErrBadRequest = errors.New("invalid request")

// Key is what the cache needs to know about one request.
type Key struct {
	// Partition says who may share the entry (see Partitioner.Partition).
	Partition string
	// Endpoint is the API path the request was sent to.
	Endpoint string
	// Exact is the hex SHA-256 over Partition, Endpoint and the canonical
	// request (CanonicalValue): the exact tier's key and the index point's id.
	Exact string
	// Fingerprint is the hex SHA-256 over everything that shapes a chat answer
	// except the text of the final user turn. Empty for non-chat endpoints.
	Fingerprint string
	// Query is the text of the final user turn, as written. The semantic
	// tier embeds, guards and stores it folded (SemanticText), and only
	// when the encoder sees all of it (Seen). Empty means the request is
	// not eligible for the semantic tier.
	Query string
	// EndUser is the end user's identity as the request carries it (OpenAI's
	// safety_identifier or user, Anthropic's metadata.user_id, or the
	// header a deployment names), "" for none. It is never part of Exact or
	// Fingerprint: the identical request gets the model's answer to that
	// very request whoever asks. The cache keeps only its keyed hash
	// (Entry.User); the identity itself is never stored, logged or counted.
	EndUser string
}

// MaxQueryBytes is the longest query the semantic tier embeds, searches
// for and stores. The built-in encoder reads the first 128 tokens of a text
// (a few hundred bytes of prose), and OpenAI's embedding models refuse an
// input over 8,192 tokens (their API reference, "input"), about 32 KiB of
// English: past 64 KiB no encoder sees the whole query, and the long-text
// rule (Lookup) would serve a candidate only for the identical text, which
// the exact tier answers anyway. A longer query is dropped from its key
// (DropLongQuery): the request is served by the exact tier alone, and the
// prompt is held once, in the request body, rather than again in the exact
// tier's entry, the write-back queue, the index and the encoder's buffers.
const MaxQueryBytes = 64 << 10

// SemanticEligible reports whether the request may be answered from, and
// written to, the semantic tier.
func (k Key) SemanticEligible() bool {
	return k.Query != "" && len(k.Query) <= MaxQueryBytes && k.Fingerprint != "" && k.Partition != ""
}

// DropLongQuery empties a query longer than MaxQueryBytes, so that nothing
// keeps it past the key's building: the request is exact-tier only.
func (k *Key) DropLongQuery() {
	if len(k.Query) > MaxQueryBytes {
		k.Query = ""
	}
}

// WithLastContent is a copy of msgs (MessagesOf) whose last message's
// content is rest, the parts SplitUserContent left beside the query: the
// messages a semantic fingerprint covers. With no parts left the content is
// gone altogether, so that a string content and an array of only text parts
// leave the same thing behind.
func WithLastContent(msgs []any, rest []any) []any {
	last := maps.Clone(msgs[len(msgs)-1].(map[string]any))
	if len(rest) == 0 {
		delete(last, "content")
	} else {
		last["content"] = rest
	}
	out := slices.Clone(msgs)
	out[len(out)-1] = last
	return out
}

// SplitUserContent separates the text of a user message's content from its
// other parts (images, audio, files). Text parts are joined with a newline.
func SplitUserContent(idx int, content any) (text string, rest []any, err error) {
	switch c := content.(type) {
	case nil:
		return "", nil, nil
	case string:
		return c, nil, nil
	case []any:
		var texts []string
		for i, p := range c {
			po, ok := p.(map[string]any)
			if !ok {
				return "", nil, BadRequest(fmt.Sprintf("messages[%d].content[%d] must be an object", idx, i))
			}
			if po["type"] != "text" {
				rest = append(rest, p)
				continue
			}
			s, ok := po["text"].(string)
			if !ok {
				return "", nil, BadRequest(fmt.Sprintf(`messages[%d].content[%d] of type "text" must have a string "text"`, idx, i))
			}
			texts = append(texts, s)
		}
		return strings.Join(texts, "\n"), rest, nil
	default:
		return "", nil, BadRequest(fmt.Sprintf("messages[%d].content must be a string or an array of parts", idx))
	}
}

// BadRequest is an error wrapping ErrBadRequest (answered 400) with msg.
func BadRequest(msg string) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, msg)
}

// Digest is a hex SHA-256 over a domain tag and length-prefixed parts, so that
// no two different part lists hash the same bytes.
func Digest(domain string, parts ...[]byte) string {
	h := sha256.New()
	writePart(h, []byte(domain))
	for _, p := range parts {
		writePart(h, p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writePart(h hash.Hash, p []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(p)))
	h.Write(n[:])
	h.Write(p)
}

// Fingerprint is the semantic fingerprint of an endpoint's request from fp,
// the decoded fields that must match for a semantic hit (everything but the
// query): a digest of fp's canonical JSON. No partition here: the index
// filters on partition separately.
func Fingerprint(endpoint string, fp any) (string, error) {
	canon, err := CanonicalValue(fp)
	if err != nil {
		return "", err
	}
	return Digest("breakwater-fingerprint-v1", []byte(endpoint), canon), nil
}

// CanonicalValue is the canonical JSON of a decoded value (DecodeObject).
func CanonicalValue(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := writeCanonical(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writeString(b, t)
	case json.Number:
		n, err := canonicalNumber(string(t))
		if err != nil {
			return err
		}
		b.WriteString(n)
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, t[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		// Only reachable if a caller hands in a value parseObject cannot produce.
		return fmt.Errorf("encode canonical json: unexpected type %T", v)
	}
	return nil
}

// writeString writes s as a JSON string: only '"', '\\' and control
// characters are escaped, everything else is written as its UTF-8 bytes.
func writeString(b *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// maxExponent bounds the decimal exponent of a number, as written in a
// request and as canonicalNumber writes it.
const maxExponent = 999999

// canonicalNumber rewrites a JSON number literal exactly (no float rounding,
// so two different 64-bit seeds stay different) into one form: integers
// without exponent up to 21 digits, plain decimals down to 1e-6, scientific
// notation with a single leading digit otherwise.
func canonicalNumber(s string) (string, error) {
	orig := s
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	exp10 := -len(frac)
	if hasExp {
		expNeg := strings.HasPrefix(exp, "-")
		exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		// A larger exponent is no real request parameter; refusing it keeps
		// the arithmetic below in int range.
		if len(exp) > len(strconv.Itoa(maxExponent)) {
			return "", BadRequest(fmt.Sprintf("number %.40s is out of range", orig))
		}
		e := 0
		if exp != "" {
			var err error
			if e, err = strconv.Atoi(exp); err != nil {
				return "", BadRequest(fmt.Sprintf("number %.40s is malformed", orig))
			}
		}
		if expNeg {
			e = -e
		}
		exp10 += e
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp10 += len(digits) - len(trimmed)
	digits = trimmed

	var out strings.Builder
	if neg {
		out.WriteByte('-')
	}
	point := len(digits) + exp10 // position of the decimal point in digits
	// The exponent written is point-1, which the digits can carry past the
	// literal's own: 100000e999997 is 1e1000002. Bound it as the literal's
	// is, so that every output reads back (FuzzCanonical found this).
	if e := point - 1; e > maxExponent || e < -maxExponent {
		return "", BadRequest(fmt.Sprintf("number %.40s is out of range", orig))
	}
	switch {
	case exp10 >= 0 && point <= 21:
		out.WriteString(digits)
		out.WriteString(strings.Repeat("0", exp10))
	case exp10 < 0 && point > 0:
		out.WriteString(digits[:point])
		out.WriteByte('.')
		out.WriteString(digits[point:])
	case exp10 < 0 && point > -6:
		out.WriteString("0.")
		out.WriteString(strings.Repeat("0", -point))
		out.WriteString(digits)
	default:
		out.WriteByte(digits[0])
		if len(digits) > 1 {
			out.WriteByte('.')
			out.WriteString(digits[1:])
		}
		out.WriteByte('e')
		out.WriteString(strconv.Itoa(point - 1))
	}
	return out.String(), nil
}

// MessagesOf returns the request's "messages": a non-empty array of objects
// with a string "role" (Chat Completions and Anthropic Messages alike).
func MessagesOf(obj map[string]any) ([]any, error) {
	msgs, ok := obj["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return nil, BadRequest(`field "messages" must be a non-empty array of message objects`)
	}
	for i, m := range msgs {
		mo, ok := m.(map[string]any)
		if !ok {
			return nil, BadRequest(fmt.Sprintf("messages[%d] must be an object", i))
		}
		if _, ok := mo["role"].(string); !ok {
			return nil, BadRequest(fmt.Sprintf(`messages[%d] must have a string "role"`, i))
		}
	}
	return msgs, nil
}

// EndUserOf returns the first of obj's fields named in names that holds a
// non-empty string: the end-user identity a request carries (Key.EndUser).
// A field of another type is no identity; the upstream validates it.
func EndUserOf(obj map[string]any, names ...string) string {
	for _, n := range names {
		if s, ok := obj[n].(string); ok && s != "" {
			return s
		}
	}
	return ""
}
