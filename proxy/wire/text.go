package wire

import (
	"unicode"
	"unicode/utf8"
)

// ResumeInstruction is what a continuation request tells the model after
// the cut answer it is given as a prefix.
const ResumeInstruction = "Your previous message was cut off. Continue it exactly where it stopped, " +
	"without repeating anything and without any preamble; output only the rest of the answer."

// Truncate cuts s to n bytes, marking the cut with "…".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Words splits s into word-sized pieces that concatenate back to s exactly:
// each piece is a run of non-space characters followed by its spaces.
func Words(s string) []string {
	var out []string
	start := 0
	inSpace := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		sp := unicode.IsSpace(r)
		if !sp && inSpace {
			out = append(out, s[start:i])
			start = i
		}
		inSpace = sp
		i += n
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
