package guard

import (
	"strings"
	"unicode/utf8"
)

// Comparison classes. Two texts whose classes differ ask about different
// ranges: "Is x > 5 true when x is 3?" and "Is x < 5 true when x is 3?" have
// opposite answers, and a sentence encoder scores them 0.988 (hardening
// audit, finding 8). "More than 5" and "at least 5" differ too (6 and 5 are
// the smallest values each admits), so gt and ge are distinct classes.
const (
	cmpGT     = "gt"     // >, more than, greater than, above, exceeds, over N
	cmpGE     = "ge"     // >=, ≥, at least, no less than, N or more
	cmpLT     = "lt"     // <, less than, fewer than, below, under N
	cmpLE     = "le"     // <=, ≤, at most, no more than, up to N, N or less
	cmpEQ     = "eq"     // =, ==, equal to, exactly
	cmpNE     = "ne"     // !=, ≠, <>, not equal to
	cmpBefore = "before" // before, earlier than, prior to
	cmpAfter  = "after"  // after, later than
)

// operatorRune reports whether r may start a comparison operator.
func operatorRune(r rune) bool {
	switch r {
	case '<', '>', '=', '≥', '≤', '≠', '⩾', '⩽':
		return true
	}
	return false
}

// scanOperator reads the run of operator characters at s[i:] and returns its
// class ("" for arrows, shifts and other non-comparisons) and its end.
func scanOperator(s string, i int) (class string, end int) {
	j := i
	for j < len(s) {
		r, w := utf8.DecodeRuneInString(s[j:])
		if !operatorRune(r) && r != '!' {
			break
		}
		j += w
	}
	op := s[i:j]
	// "->" and "<-" are arrows (C, Go channels, Haskell), not comparisons.
	if i > 0 && s[i-1] == '-' || j < len(s) && s[j] == '-' {
		return "", j
	}
	switch op {
	case ">":
		return cmpGT, j
	case ">=", "≥", "⩾":
		return cmpGE, j
	case "<":
		return cmpLT, j
	case "<=", "≤", "⩽":
		return cmpLE, j
	case "=", "==", "===":
		return cmpEQ, j
	case "!=", "!==", "≠", "<>":
		return cmpNE, j
	}
	return "", j // =>, <<, >>, <=>, …
}

// comparisons returns t's comparison classes: the operators parse found and
// the ordering phrases among its words.
func comparisons(t *text) []string {
	out := t.cmp
	toks := t.toks
	word := func(i int) string {
		if i < 0 || i >= len(toks) {
			return ""
		}
		return toks[i].low
	}
	// numberWithin reports whether a number (or a currency before one) starts
	// within n tokens after i: "over 18", "under Rs. 5000".
	numberWithin := func(i, n int) bool {
		for k := i + 1; k <= i+n && k < len(toks); k++ {
			if startsNumber(toks[k]) || toks[k].in.flags&fNum != 0 {
				return true
			}
			if toks[k].in.cur == "" && !toks[k].sym {
				return false
			}
		}
		return false
	}
	for i := 0; i < len(toks); i++ {
		w := word(i)
		class := ""
		switch w {
		case "more", "greater", "higher", "larger", "bigger", "less", "fewer", "lower", "smaller":
			if word(i+1) != "than" {
				// "5 or more", "10 or fewer".
				if word(i-1) == "or" && numberWithin(i-3, 2) {
					if upward(w) {
						class = cmpGE
					} else {
						class = cmpLE
					}
				}
				break
			}
			up := upward(w)
			switch word(i - 1) {
			case "no", "not":
				up = !up
				if up {
					class = cmpGE // no less than
				} else {
					class = cmpLE // no more than
				}
			default:
				if up {
					class = cmpGT
				} else {
					class = cmpLT
				}
			}
			// "greater than or equal to".
			if word(i+2) == "or" && strings.HasPrefix(word(i+3), "equal") {
				if up {
					class = cmpGE
				} else {
					class = cmpLE
				}
				i += 3
			}
			i++
		case "least", "most":
			if word(i-1) == "at" {
				class = map[string]string{"least": cmpGE, "most": cmpLE}[w]
			}
		case "exceed", "exceeds", "exceeding", "exceeded", "above", "beyond":
			class = cmpGT
		case "below", "beneath":
			class = cmpLT
		case "over", "under":
			// Only before an amount: "under the hood", "over the years"
			// are not comparisons.
			if numberWithin(i, 3) {
				class = map[string]string{"over": cmpGT, "under": cmpLT}[w]
			}
		case "up":
			if word(i+1) == "to" && numberWithin(i+1, 3) {
				class = cmpLE
				i++
			}
		case "equal", "equals", "exactly":
			if word(i-1) == "not" {
				class = cmpNE
			} else if w != "equal" || word(i+1) == "to" {
				class = cmpEQ
			}
		case "before", "earlier", "prior":
			if w == "before" || word(i+1) == "than" || word(i+1) == "to" {
				class = cmpBefore
			}
		case "after", "later":
			if w == "after" || word(i+1) == "than" {
				class = cmpAfter
			}
		}
		if class != "" {
			out = append(out, class)
		}
	}
	return out
}

// upward reports whether a comparative word points up (more, greater).
func upward(w string) bool {
	switch w {
	case "more", "greater", "higher", "larger", "bigger":
		return true
	}
	return false
}
