package wire

// CharsPerToken is the estimator of a request's input tokens: the
// characters of the text it sends over four, OpenAI's rule of thumb for
// English text ("one token is roughly four characters",
// https://platform.openai.com/tokenizer), which its own rate limiter applies
// at admission before the tokenizer runs
// (https://platform.openai.com/docs/guides/rate-limits). No tokenizer runs
// on the miss path: the estimate is corrected by the answer's usage
// (upstream.Request.Usage).
const CharsPerToken = 4

// TextTokens estimates the input tokens of a JSON request body: the bytes
// of its string values over CharsPerToken, rounded up. Object keys, the
// values of the fields named in skip (the model, a base64 payload) and data:
// URLs are not text the model reads as tokens, and are left out.
func TextTokens(body []byte, skip ...string) int {
	n, inString, esc := 0, false, false
	var key []byte
	start := 0
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inString = false
				s := body[start:i]
				j := i + 1
				for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
					j++
				}
				if j < len(body) && body[j] == ':' {
					key = s
					continue
				}
				if len(s) >= 5 && string(s[:5]) == "data:" || skipped(key, skip) {
					continue
				}
				n += len(s)
			}
			continue
		}
		if c == '"' {
			inString, start = true, i+1
		}
	}
	return (n + CharsPerToken - 1) / CharsPerToken
}

func skipped(key []byte, skip []string) bool {
	for _, s := range skip {
		if string(key) == s {
			return true
		}
	}
	return false
}

// IntField reads the first of names that a JSON object body sets, at its
// top level, to a positive whole number; 0 when none does. A scan of the
// top-level fields (TopFields), without decoding: it runs on every miss.
func IntField(body []byte, names ...string) int {
	best, at := 0, len(names)
	TopFields(body, func(key []byte, vStart, vEnd int) bool {
		for i, name := range names[:at] {
			if string(key) == name {
				if n, ok := parseCount(body[vStart:vEnd]); ok && n > 0 && n <= 1<<31 {
					best, at = int(n), i
				}
				break
			}
		}
		return at > 0
	})
	return best
}
