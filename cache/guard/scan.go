package guard

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one word of a query, as the rules see it.
type token struct {
	raw   string // as written, trailing punctuation and possessive 's removed
	low   string // lower-cased raw
	start bool   // first word of a sentence
	sym   bool   // a lone currency or percent symbol ($, ₹, €, £, ¥, %)
	code  bool   // written in backticks
	// other: a word with a letter outside the Latin script. The word
	// tables, the lemmatiser and the capitalisation cues are English, so
	// such a word cannot be classified; it is compared verbatim, like an
	// identifier.
	other bool
	stem  string // contentStem: "" for words the content rule ignores
	in    *info  // what the word tables say about low (never nil)
}

// text is a query broken into what the rules compare.
type text struct {
	toks   []token
	quoted []string // lower-cased, squashed contents of quoted spans
	flat   string   // lower-cased letters and digits only, for containment
	cmp    []string // comparison operators (>, ≤, !=, …) as classes (compare.go)
}

// parse splits s into tokens, appending them to buf[:0].
func parse(s string, buf []token) text {
	var t text
	t.toks = buf[:0]
	t.flat = squash(s)
	if strings.ContainsAny(s, "\"“‘'") {
		t.quoted = quotedSpans(s)
	}

	start := true
	inCode := false
	i := 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '`':
			inCode = !inCode
			i += w
			continue
		case isWordRune(r):
			j := scanWord(s, i)
			if w := s[i:j]; isPlain(w) {
				t.add(w, start, inCode)
			} else {
				for _, part := range splitWord(w) {
					t.add(trimPossessive(part), start, inCode)
					start = false
				}
			}
			start = false
			i = j
			continue
		case operatorRune(r) || r == '!' && i+1 < len(s) && s[i+1] == '=':
			var class string
			class, i = scanOperator(s, i)
			if class != "" {
				t.cmp = append(t.cmp, class)
			}
			continue
		case r == '$' || r == '₹' || r == '€' || r == '£' || r == '¥' || r == '%':
			t.toks = append(t.toks, token{raw: s[i : i+w], low: s[i : i+w], sym: true, in: lookup(s[i : i+w])})
		case r == '?' || r == '!' || r == ';' || r == '\n':
			start = true
		case r == '.' || r == ':':
			// A full stop ends a sentence only before a space: ".NET" does not.
			start = start || i+w == len(s) || s[i+w] == ' ' || s[i+w] == '\t' || s[i+w] == '\n'
		}
		i += w
	}
	return t
}

func (t *text) add(raw string, start, code bool) {
	if raw == "" {
		return
	}
	low := lower(raw)
	if !latin(raw) {
		t.toks = append(t.toks, token{raw: raw, low: low, start: start, code: code, other: true, in: noInfo})
		return
	}
	in := lookup(low)
	plain := low
	if in == noInfo && !isPlain(low) && strings.ContainsAny(low, "'’") {
		plain = strings.NewReplacer("'", "", "’", "").Replace(low) // can't → cant, what's → whats
		in = lookup(plain)
	}
	t.toks = append(t.toks, token{raw: raw, low: low, start: start, code: code, in: in, stem: contentStem(plain, in)})
}

// latin reports whether every letter of w is of the Latin script (ASCII
// letters, and those with diacritics).
func latin(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			for _, r := range w[i:] {
				if unicode.IsLetter(r) && !unicode.Is(unicode.Latin, r) {
					return false
				}
			}
			return true
		}
	}
	return true
}

// isPlain reports whether w is only ASCII letters and digits.
func isPlain(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// scanWord returns the end of the word starting at i. Joiners ('.', '-',
// '/', '\”, ',', ':', '+', '#') stay inside a word only between word runes
// (and ',' or ':' only between digits), so "node.js", "30,000", "don't",
// "12:30" and "src/main.go" are one word and "end." is not.
func scanWord(s string, i int) int {
	j := i
	for j < len(s) {
		r, w := utf8.DecodeRuneInString(s[j:])
		if isWordRune(r) {
			j += w
			continue
		}
		if j+w >= len(s) {
			break
		}
		next, _ := utf8.DecodeRuneInString(s[j+w:])
		prev, _ := utf8.DecodeLastRuneInString(s[i:j])
		switch r {
		case '.':
			// "pants.I want": a missing space after a full stop, not a name.
			if isWordRune(next) && !(unicode.IsUpper(next) && lowerWordBefore(s[i:j])) {
				j += w
				continue
			}
		case '-', '/', '\\', '\'', '’':
			if isWordRune(next) {
				j += w
				continue
			}
		case ',', ':':
			if unicode.IsDigit(prev) && unicode.IsDigit(next) {
				j += w
				continue
			}
		case '+', '#':
			// C++, C#, F#: one- or two-letter language names.
			if j-i <= 2 {
				k := j
				for k < len(s) && (s[k] == '+' || s[k] == '#') {
					k++
				}
				return k
			}
		}
		break
	}
	// A trailing "++"/"#" right after a short word (the loop above stops at
	// the end of input before looking at it).
	if j < len(s) && j-i <= 2 && (s[j] == '+' || s[j] == '#') && (j+1 == len(s) || !isWordRune(rune(s[j+1]))) {
		k := j
		for k < len(s) && (s[k] == '+' || s[k] == '#') {
			k++
		}
		return k
	}
	return j
}

// lowerWordBefore reports whether the last dot-separated segment of w is a
// lower-case word of two or more letters.
func lowerWordBefore(w string) bool {
	if k := strings.LastIndexAny(w, "./-"); k >= 0 {
		w = w[k+1:]
	}
	if len(w) < 2 {
		return false
	}
	for _, r := range w {
		if !unicode.IsLower(r) {
			return false
		}
	}
	return true
}

// splitWord splits "famous/popular" and "Delhi/NCR" into their parts but
// keeps paths ("/usr/bin", "src/main.go", "a/b/c") whole.
func splitWord(w string) []string {
	if !strings.ContainsRune(w, '/') || isPath(w) {
		return []string{w}
	}
	return strings.Split(w, "/")
}

func isPath(w string) bool {
	return strings.Count(w, "/") >= 2 || strings.ContainsRune(w, '\\') ||
		(strings.ContainsRune(w, '.') && strings.ContainsRune(w, '_')) ||
		strings.HasPrefix(w, "~") || strings.HasPrefix(w, ".")
}

func trimPossessive(w string) string {
	for _, suf := range [...]string{"'s", "’s", "'S"} {
		if len(w) > len(suf) && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return strings.TrimRight(w, "'’")
}

// lower returns w lower-cased, without allocating when it already is.
func lower(w string) string {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.ToLower(w)
		}
	}
	return w
}

// quotedSpans returns the squashed, lower-cased contents of "double",
// “curly” and ‘single’ quotes, and of 'single' quotes that open after a space
// and close before one (so apostrophes in "don't" or "investor's" are not
// quotes). Quora's CSV-style doubled quotes ("") count as one.
func quotedSpans(s string) []string {
	var out []string
	s = strings.ReplaceAll(s, `""`, `"`)
	for _, q := range [...][2]string{{`"`, `"`}, {"“", "”"}, {"‘", "’"}, {"'", "'"}} {
		rest := s
		for {
			a := strings.Index(rest, q[0])
			if a < 0 {
				break
			}
			if q[0] == "'" && a > 0 && isWordRune(rune(rest[a-1])) {
				rest = rest[a+1:]
				continue
			}
			body := rest[a+len(q[0]):]
			b := strings.Index(body, q[1])
			if q[1] == "'" {
				// The closing quote must end a word.
				for b >= 0 && b+1 < len(body) && isWordRune(rune(body[b+1])) {
					nb := strings.Index(body[b+1:], q[1])
					if nb < 0 {
						b = -1
						break
					}
					b += 1 + nb
				}
			}
			if b < 0 {
				break
			}
			if sq := squash(body[:b]); sq != "" {
				out = append(out, sq)
			}
			rest = body[b+len(q[1]):]
		}
	}
	return out
}

// squash lower-cases s and keeps only letters and digits.
func squash(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				b = append(b, c)
			case 'A' <= c && c <= 'Z':
				b = append(b, c+'a'-'A')
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b = utf8.AppendRune(b, unicode.ToLower(r))
		}
		i += w
	}
	return string(b)
}

// has reports whether t has a token whose lower-cased form is w.
func (t *text) has(w string) bool {
	for i := range t.toks {
		if t.toks[i].low == w {
			return true
		}
	}
	return false
}

// mentions reports whether w (lower-cased) appears in t: as a token, or, for
// words of four or more letters, inside t's squashed text, so "TechMahindra"
// matches "Tech Mahindra" and "Delhi-NCR" matches "Delhi NCR".
func (t *text) mentions(w string) bool {
	if t.has(w) {
		return true
	}
	sq := w
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= utf8.RuneSelf || !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9')) {
			sq = squash(w)
			break
		}
	}
	return len(sq) >= 4 && strings.Contains(t.flat, sq)
}
