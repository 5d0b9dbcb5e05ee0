package wire

// Usage is the token counts of one answer as its provider reported them:
// Input is what the provider bills as prompt, Output as generation.
// Known is false when the answer carries no usage (a Chat stream without
// stream_options.include_usage, an error): nothing is counted then.
type Usage struct {
	Input, Output uint64
	Known         bool
}

// UsageFields names where one API puts its usage: the top-level object
// (Field) and the counters in it that add up to Input and to Output.
type UsageFields struct {
	Field         string
	Input, Output []string
}

// Read finds the usage of a JSON answer body without decoding it: a scan
// of the top-level fields and of the usage object's, no allocation, so the
// miss path pays a pass over bytes it already holds. A body it cannot scan,
// or one without the usage object, gives a zero, unknown Usage.
func (uf *UsageFields) Read(body []byte) Usage {
	var u Usage
	var obj []byte
	whole := TopFields(body, func(key []byte, vStart, vEnd int) bool {
		if string(key) == uf.Field {
			obj = body[vStart:vEnd]
		}
		return true
	})
	if !whole || len(obj) == 0 || obj[0] != '{' {
		return u
	}
	ok := TopFields(obj, func(key []byte, vStart, vEnd int) bool {
		n, isNum := parseCount(obj[vStart:vEnd])
		if !isNum {
			return true
		}
		for _, f := range uf.Input {
			if string(key) == f {
				u.Input += n
				u.Known = true
			}
		}
		for _, f := range uf.Output {
			if string(key) == f {
				u.Output += n
				u.Known = true
			}
		}
		return true
	})
	if !ok {
		return Usage{}
	}
	return u
}

// parseCount reads a non-negative JSON integer.
func parseCount(v []byte) (uint64, bool) {
	if len(v) == 0 || len(v) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// TopFields calls fn with the name and raw value offsets of each top-level
// field of the JSON object body, without decoding any value. It reports
// false when body is not one object it can scan, or when fn returned false.
// Not cache.DecodeObject: the exact hit patches stored bytes at these offsets
// and must not decode or re-encode the values.
func TopFields(body []byte, fn func(key []byte, vStart, vEnd int) bool) bool {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i++
	for {
		i = skipSpace(body, i)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case '}':
			return skipSpace(body, i+1) == len(body)
		case ',':
			i++
			continue
		case '"':
		default:
			return false
		}
		kEnd := skipString(body, i)
		if kEnd < 0 {
			return false
		}
		key := body[i+1 : kEnd-1]
		i = skipSpace(body, kEnd)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipSpace(body, i+1)
		vEnd := skipValue(body, i)
		if vEnd < 0 || !fn(key, i, vEnd) {
			return false
		}
		i = vEnd
	}
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
