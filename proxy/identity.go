package proxy

import (
	"strconv"
	"time"
)

// rewriteIdentity gives a cached body a fresh "id" and "created", so every
// answer looks like a new completion to the client. It rewrites the two
// top-level values in place with a small scanner instead of decoding and
// re-encoding the body: on the exact-hit path that was most of the time
// (BenchmarkExactHitHandler). Bodies it cannot scan are returned unchanged.
func rewriteIdentity(body []byte, now time.Time) []byte {
	idStart, idEnd, crStart, crEnd := -1, -1, -1, -1
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return body
	}
	i++
	for {
		i = skipSpace(body, i)
		if i >= len(body) {
			return body
		}
		if body[i] == '}' {
			break
		}
		if body[i] == ',' {
			i++
			continue
		}
		if body[i] != '"' {
			return body
		}
		kEnd := skipString(body, i)
		if kEnd < 0 {
			return body
		}
		key := string(body[i+1 : kEnd-1])
		i = skipSpace(body, kEnd)
		if i >= len(body) || body[i] != ':' {
			return body
		}
		i = skipSpace(body, i+1)
		vEnd := skipValue(body, i)
		if vEnd < 0 {
			return body
		}
		switch key {
		case "id":
			idStart, idEnd = i, vEnd
		case "created":
			crStart, crEnd = i, vEnd
		}
		i = vEnd
	}
	prefix := "chatcmpl-bw"
	if idStart >= 0 && idEnd-idStart > 6 && string(body[idStart:idStart+6]) == `"cmpl-` {
		prefix = "cmpl-bw"
	}
	type span struct {
		start, end int
		val        string
	}
	var spans [2]span
	n := 0
	if idStart >= 0 {
		spans[n] = span{idStart, idEnd, `"` + prefix + newID()[:24] + `"`}
		n++
	}
	if crStart >= 0 {
		spans[n] = span{crStart, crEnd, strconv.FormatInt(now.Unix(), 10)}
		n++
	}
	if n == 2 && spans[1].start < spans[0].start {
		spans[0], spans[1] = spans[1], spans[0]
	}
	out := make([]byte, 0, len(body)+32)
	last := 0
	for _, s := range spans[:n] {
		out = append(out, body[last:s.start]...)
		out = append(out, s.val...)
		last = s.end
	}
	return append(out, body[last:]...)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := skipString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}
