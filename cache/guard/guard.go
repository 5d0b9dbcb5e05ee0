// Package guard rejects semantic-cache candidates whose answer-determining words differ from the query's.
//
// A sentence encoder scores "best phone under Rs. 5000" and "best phone under
// Rs. 4000" as near-identical, and cosine similarity alone cannot tell them
// apart: on Quora Question Pairs, precision stays near 0.72 at every threshold
// from 0.90 to 0.97 (issue 8). The guard runs after the threshold and compares
// the two query texts on the tokens that decide the answer. Each rule is
// explainable: a rejection names its rule as a short, stable reason that is
// used as a metric label value.
package guard

import (
	"strings"
	"sync"

	"github.com/breakwater-dev/breakwater/lib/textnorm"
)

// tokenPool recycles the token slices of Check, its largest allocation.
var tokenPool = sync.Pool{New: func() any { return &[2][]token{make([]token, 0, 32), make([]token, 0, 32)} }}

// Reasons returned by Check. They are stable: metrics and logs use them as
// label values.
const (
	ReasonQuoted     = "quoted"     // a quoted string of one text is not in the other
	ReasonIdentifier = "identifier" // a code identifier (snake_case, camelCase, dotted.name, path, `code`) differs
	ReasonNumber     = "number"     // numbers, amounts, currencies or units differ
	ReasonYear       = "year"       // a year differs
	ReasonComparison = "comparison" // comparisons differ: >, <, ≥, at least, more than, below, before/after…
	ReasonDate       = "date"       // a month, weekday or relative day differs
	ReasonNegation   = "negation"   // one text is negated and the other is not
	ReasonOpposite   = "opposite"   // opposite words: best/worst, more/less, husband/wife, buy/sell…
	ReasonName       = "name"       // a capitalised name or acronym of one text is not in the other
	ReasonOrder      = "order"      // roles swap: "X to Y" vs "Y to X", "India attacks Pakistan" vs "Pakistan attacks India"
	ReasonQuestion   = "question"   // one asks why/where/when/who, the other another of those or how
	ReasonDirective  = "directive"  // a word telling the model how to answer (say, reply, only, yes…) is in one text only
	ReasonContent    = "content"    // a content word of one text has no counterpart in the other
)

// Reasons lists every reason Check can return, in the order the rules run.
var Reasons = []string{ReasonQuoted, ReasonIdentifier, ReasonNumber, ReasonYear,
	ReasonComparison, ReasonDate, ReasonNegation, ReasonOpposite, ReasonName, ReasonQuestion, ReasonOrder, ReasonDirective, ReasonContent}

// Options turns rules off. The zero value runs every rule, which is the
// default the dev-set figures in docs/PRECISION.md were measured with.
type Options struct {
	// NoQuoted skips the quoted-string rule.
	NoQuoted bool
	// NoIdentifiers skips the code-identifier rule.
	NoIdentifiers bool
	// NoNumbers skips the rule on numbers, amounts, units and years.
	NoNumbers bool
	// NoComparisons skips the rule on comparison operators and ordering
	// words (>, ≤, at least, more than, below, before/after…).
	NoComparisons bool
	// NoDates skips the rule on month, weekday and relative-day words.
	NoDates bool
	// NoNegation skips the negation rule.
	NoNegation bool
	// NoOpposites skips the rule on opposite words (best/worst, buy/sell…).
	NoOpposites bool
	// NoNames skips the rule on capitalised names and acronyms.
	NoNames bool
	// NamesSubstitutedOnly relaxes the name rule: a name present in only one
	// text rejects only when the other text has a name of its own that the
	// first lacks ("in Dallas" vs "in Seattle"), not when it merely adds one
	// ("for Android" vs nothing). False (the default) rejects both.
	NamesSubstitutedOnly bool
	// NoQuestion skips the question-word rule (why vs how, where vs when).
	NoQuestion bool
	// NoOrder skips the role-swap rule.
	NoOrder bool
	// NoDirectives skips the rule on words that tell a model how to
	// answer (an imperative say, reply, repeat, ignore, pretend…; a bare
	// yes, ok, nope): each must be in both texts or in neither. They are
	// function words the content rule ignores, and a prompt made of the
	// victim's question and "just say yes" scored 0.96 with every other
	// rule passing (issue 42).
	NoDirectives bool
	// NoContent skips the content-word rule: every word of either text that
	// is not a stop word, a filler or a number must have a counterpart in the
	// other (same rough stem, a shared six-letter prefix, or a known synonym).
	// It is the strictest rule and the one that lifts precision on the dev
	// set from about 0.8 to about 0.9 (docs/PRECISION.md); it also turns away
	// paraphrases that use synonyms the guard does not know.
	NoContent bool
	// MaxUnmatched is how many content words without a counterpart the
	// content rule tolerates, over both texts. Zero tolerates none.
	MaxUnmatched int
}

// Guard compares a query with a cached candidate's query. It holds no
// mutable state and is safe for concurrent use.
type Guard struct {
	opts Options
}

// New returns a guard running the rules opts leaves on.
func New(opts Options) *Guard {
	return &Guard{opts: opts}
}

// Check reports whether candidate may answer query. When it may not, reason
// names the first rule that rejected it (one of Reasons). Case, punctuation,
// the order of ordinary words, contractions, plurals and the synonyms the
// content rule knows do not matter to any rule; the cosine threshold is
// expected to have run first. Both texts are folded first (NFKC, every
// decimal digit and confusable punctuation in ASCII: textnorm.Semantic).
// A nil Guard accepts everything.
func (g *Guard) Check(query, candidate string) (ok bool, reason string) {
	if g == nil {
		return true, ""
	}
	// The rules reason on the folded text: an Arabic-Indic digit is a digit
	// to the number rule, a fullwidth or ideographic full stop a dot to the
	// identifier rule (issue 42). Printable ASCII is returned as it is.
	query, _ = textnorm.Semantic(query)
	candidate, _ = textnorm.Semantic(candidate)
	if query == candidate {
		return true, ""
	}
	bufs := tokenPool.Get().(*[2][]token)
	a, b := parse(query, bufs[0]), parse(candidate, bufs[1])
	defer func() {
		// Keep the grown slices, drop references to the texts.
		clear(a.toks)
		clear(b.toks)
		bufs[0], bufs[1] = a.toks[:0], b.toks[:0]
		tokenPool.Put(bufs)
	}()
	o := g.opts
	if !o.NoQuoted && !(allMentioned(a.quoted, &b) && allMentioned(b.quoted, &a)) {
		return false, ReasonQuoted
	}
	if !o.NoIdentifiers && (len(missing(identifiers(&a), &b)) > 0 || len(missing(identifiers(&b), &a)) > 0) {
		return false, ReasonIdentifier
	}
	if !o.NoNumbers {
		na, ya := numbers(&a)
		nb, yb := numbers(&b)
		if !sameSet(na, nb) {
			if differsInYear(na, ya, nb) || differsInYear(nb, yb, na) {
				return false, ReasonYear
			}
			return false, ReasonNumber
		}
	}
	if !o.NoComparisons && !sameSet(comparisons(&a), comparisons(&b)) {
		return false, ReasonComparison
	}
	if !o.NoDates && !sameSet(dates(&a), dates(&b)) {
		return false, ReasonDate
	}
	if !o.NoNegation {
		if na, nb := negated(&a), negated(&b); na != nb || (na && negationMoved(&a, &b)) {
			return false, ReasonNegation
		}
	}
	if !o.NoOpposites && (oppositeSides(&a, &b) || oppositeSides(&b, &a)) {
		return false, ReasonOpposite
	}
	if !o.NoNames {
		ma, mb := missing(names(&a), &b), missing(names(&b), &a)
		if o.NamesSubstitutedOnly {
			if len(ma) > 0 && len(mb) > 0 {
				return false, ReasonName
			}
		} else if len(ma) > 0 || len(mb) > 0 {
			return false, ReasonName
		}
	}
	if !o.NoQuestion && askDifferently(&a, &b) {
		return false, ReasonQuestion
	}
	if !o.NoOrder && swapped(&a, &b) {
		return false, ReasonOrder
	}
	if !o.NoDirectives && !sameSet(directiveWords(&a), directiveWords(&b)) {
		return false, ReasonDirective
	}
	if !o.NoContent && unmatched(&a, &b)+unmatched(&b, &a) > o.MaxUnmatched {
		return false, ReasonContent
	}
	return true, ""
}

// allMentioned reports whether every squashed string of qs occurs in t.
func allMentioned(qs []string, t *text) bool {
	for _, q := range qs {
		if !containsFlat(t.flat, q) {
			return false
		}
	}
	return true
}

func containsFlat(flat, q string) bool {
	return q != "" && strings.Contains(flat, q)
}

// differsInYear reports whether a year of a is missing from b.
func differsInYear(a []string, years []bool, b []string) bool {
	for i, x := range a {
		if !years[i] {
			continue
		}
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			return true
		}
	}
	return false
}
