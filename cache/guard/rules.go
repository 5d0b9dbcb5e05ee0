package guard

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// numbers returns t's numbers as comparable strings: currency, value and unit
// ("inr:5000", "6month", "2017", "10"), with "5k" = "5,000" = "5 thousand",
// "six" = "6" and "Rs. 500" = "500 rupees". Model-like words with digits
// ("i7", "PS4", "5'10") are kept as written. years reports which are years.
func numbers(t *text) (out []string, years []bool) {
	toks := t.toks
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		cur := ""
		if c := tk.in.cur; c != "" && i+1 < len(toks) && startsNumber(toks[i+1]) {
			cur = c
			i++
			tk = toks[i]
		}
		if c, rest := currencyPrefix(tk.low); c != "" {
			cur, tk.low = c, rest // "rs.5000", "usd500"
		}
		val, unit, raw, ok := parseNumber(tk)
		if !ok && tk.low == "one" && i+1 < len(toks) && !toks[i+1].sym && (toks[i+1].in.unit != "" || toks[i+1].in.mul != 0) {
			val, ok = 1, true // "one month", "one million": the numeral, not the pronoun
		}
		if !ok {
			if m := tk.in.mul; m != 0 && len(tk.low) > 2 {
				// "few thousand" vs "few hundred": a bare magnitude.
				out = append(out, "x"+strconv.FormatFloat(m, 'f', -1, 64))
				years = append(years, false)
			}
			continue
		}
		if raw != "" {
			out = append(out, raw)
			years = append(years, false)
			continue
		}
		// Magnitude, currency and unit words after the number.
		for i+1 < len(toks) {
			next := toks[i+1].in
			if m := next.mul; m != 0 && unit == "" {
				val *= m
			} else if c := next.cur; c != "" && cur == "" && !toks[i+1].sym {
				cur = c
			} else if u := next.unit; u != "" && unit == "" {
				unit = u
			} else {
				break
			}
			i++
		}
		s := strconv.FormatFloat(val, 'f', -1, 64)
		year := cur == "" && unit == "" && val >= 1800 && val <= 2100 && val == float64(int(val)) && len(tk.low) == 4
		if cur != "" {
			s = cur + ":" + s
		}
		out = append(out, s+unit)
		years = append(years, year)
	}
	return out, years
}

func currencyPrefix(w string) (cur, rest string) {
	for _, p := range [...][2]string{{"rs.", "inr"}, {"rs", "inr"}, {"inr", "inr"}, {"us$", "usd"}, {"usd", "usd"}} {
		if len(w) > len(p[0]) && strings.HasPrefix(w, p[0]) && w[len(p[0])] >= '0' && w[len(p[0])] <= '9' {
			return p[1], w[len(p[0]):]
		}
	}
	return "", w
}

func startsNumber(tk token) bool {
	if tk.low == "" {
		return false
	}
	r, _ := utf8.DecodeRuneInString(tk.low)
	return unicode.IsDigit(r) || tk.in.flags&fNum != 0
}

// parseNumber reads one token as a number. It returns the value and a unit
// suffix ("5kg"), or raw for words with digits that are not plain amounts.
func parseNumber(tk token) (val float64, unit, raw string, ok bool) {
	w := tk.low
	if tk.in != nil && tk.in.flags&fNum != 0 {
		return tk.in.num, "", "", true
	}
	if !hasDigit(w) {
		return 0, "", "", false
	}
	if w[0] < '0' || w[0] > '9' {
		return 0, "", w, true // "i7", "ps4", "s7"
	}
	j := 0
	dots := 0
	for j < len(w) && (w[j] >= '0' && w[j] <= '9' || w[j] == ',' || w[j] == '.') {
		if w[j] == '.' {
			dots++
		}
		j++
	}
	num, suf := w[:j], w[j:]
	if dots > 1 || strings.ContainsAny(suf, "0123456789'’:.-/") {
		return 0, "", w, true // versions, times, heights, ranges
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
	if err != nil {
		return 0, "", w, true
	}
	switch suf {
	case "":
	case "st", "nd", "rd", "th":
	case "s":
		if len(num) == 4 { // "1990s"
			return 0, "", w, true
		}
	default:
		if m, isMul := multipliers[suf]; isMul {
			v *= m
		} else if u, isUnit := units[suf]; isUnit {
			unit = u
		} else {
			return 0, "", w, true // "3d", "4g"
		}
	}
	return v, unit, "", true
}

// dates returns t's month, weekday and relative-day words, canonicalised.
func dates(t *text) []string {
	var out []string
	for _, tk := range t.toks {
		d := tk.in.month
		if d == "" {
			continue
		}
		if tk.in.flags&fAmbigDate != 0 && (tk.start || !isCapitalised(tk.raw)) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// negated reports whether t contains a negation word or an n't contraction.
func negated(t *text) bool {
	for _, tk := range t.toks {
		if isNegation(tk) {
			return true
		}
	}
	return false
}

// isNegation reports whether tk is a negation word or an n't contraction
// (the words negated counts).
func isNegation(tk token) bool {
	w := tk.low
	if tk.in.flags&fNeg == 0 && !strings.HasSuffix(w, "n't") && !strings.HasSuffix(w, "n’t") {
		return false
	}
	return w != "wont" || tk.raw == "wont" // "Wont" at a sentence start is rarely "won't"
}

// negatedWords returns, for every negation of t, what it denies: the stems
// of the first two content words after it, stopping at the end of its
// clause ("cannot do in India but …" → [india]; "why don't highways have
// lights" → [highway light], which covers the inverted question's subject and
// its verb). A negation with no content word after it in its clause gives an
// empty list.
func negatedWords(t *text) [][]string {
	var out [][]string
	for i, tk := range t.toks {
		if !isNegation(tk) {
			continue
		}
		var ws []string
		for _, n := range sentence(t, i, +1) {
			if clauseBreak[n.low] || isNegation(n) || len(ws) == 2 {
				break
			}
			if n.stem != "" {
				ws = append(ws, n.stem)
			}
		}
		out = append(out, ws)
	}
	return out
}

// clauseBreak ends the reach of a negation.
var clauseBreak = set("but", "and", "or", "while", "whereas", "though", "although", "yet", "if", "when")

// negationMoved reports whether both texts are negated but deny different
// things: "what can't Muslims do in India but can elsewhere" vs "what can
// Muslims do in India but not elsewhere". Every negation of each text must
// deny a word that some negation of the other text denies; a negation that
// denies no content word ("I don't.") leaves the texts to the presence test.
func negationMoved(a, b *text) bool {
	na, nb := negatedWords(a), negatedWords(b)
	empty := func(ws []string) bool { return len(ws) == 0 }
	if slices.ContainsFunc(na, empty) || slices.ContainsFunc(nb, empty) {
		return false
	}
	return !deniedIn(na, nb) || !deniedIn(nb, na)
}

// deniedIn reports whether each list of a shares a word with some list of b.
func deniedIn(a, b [][]string) bool {
	for _, x := range a {
		shares := func(y []string) bool {
			return slices.ContainsFunc(x, func(w string) bool { return slices.Contains(y, w) })
		}
		if !slices.ContainsFunc(b, shares) {
			return false
		}
	}
	return true
}

// identifiers returns t's code-like words: anything in backticks, snake_case,
// camelCase (iPhone, getUserName), dotted.names and paths.
func identifiers(t *text) []string {
	var out []string
	for _, tk := range t.toks {
		if tk.code || tk.other || isIdentifier(tk.raw) {
			out = append(out, tk.low)
		}
	}
	return out
}

func isIdentifier(w string) bool {
	if isPlain(w) {
		return isCamel(w)
	}
	if strings.ContainsAny(w, "+#") { // C++, C#, AB+
		return true
	}
	if strings.ContainsRune(w, '_') || strings.ContainsRune(w, '/') || strings.ContainsRune(w, '\\') {
		return true
	}
	if strings.ContainsRune(w, '.') {
		// "node.js", "os.path", "amazon.com"; not "U.S." or "e.g" or "2.5".
		long, letters := false, false
		for _, seg := range strings.Split(w, ".") {
			if utf8.RuneCountInString(seg) >= 2 {
				long = true
			}
			for _, r := range seg {
				if unicode.IsLetter(r) {
					letters = true
				}
			}
		}
		if long && letters {
			return true
		}
	}
	return isCamel(w)
}

// isCamel reports whether a lower-case letter is directly followed by an
// upper-case one (camelCase, iPhone).
func isCamel(w string) bool {
	prevLower := false
	for _, r := range w {
		if prevLower && unicode.IsUpper(r) {
			return true
		}
		prevLower = unicode.IsLower(r)
	}
	return false
}

func hasDigit(w string) bool {
	for i := 0; i < len(w); i++ {
		if '0' <= w[i] && w[i] <= '9' {
			return true
		}
	}
	return false
}

// isAllCaps reports whether w has two or more letters, all upper-case.
func isAllCaps(w string) bool {
	n := 0
	for _, r := range w {
		if unicode.IsLetter(r) {
			if !unicode.IsUpper(r) {
				return false
			}
			n++
		}
	}
	return n >= 2
}

func isCapitalised(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsUpper(r)
}

// names returns the lower-cased capitalised words of t that are not the
// first word of a sentence, a stop word, a date, a number or an identifier;
// all-caps words (NASA, SRM) count wherever they stand. A text written in
// Title Case or ALL CAPS has no names: capitals say nothing there.
func names(t *text) []string {
	var caps, words int
	for _, tk := range t.toks {
		if tk.start || !isAlpha(tk.raw) {
			continue
		}
		words++
		if isCapitalised(tk.raw) {
			caps++
		}
	}
	if words >= 3 && caps*2 > words {
		return nil
	}
	var out []string
	for k, tk := range t.toks {
		in := tk.in
		if tk.code || !isAlpha(tk.raw) || tk.low == "i" || in.month != "" || in.cur != "" {
			continue
		}
		allCaps := isAllCaps(tk.raw)
		if (tk.start && !allCaps) || !isCapitalised(tk.raw) || isIdentifier(tk.raw) {
			continue
		}
		// "IT" and "US" are names; "It" and "Us" are not. A unit is a name
		// unless a number comes first ("LG G5", not "5 G").
		if (in.flags&fStop != 0 && !allCaps) || (in.unit != "" && k > 0 && startsNumber(t.toks[k-1])) {
			continue
		}
		out = append(out, tk.low)
	}
	return out
}

func isAlpha(w string) bool {
	for _, r := range w {
		if !unicode.IsLetter(r) && r != '-' && r != '.' && r != '\'' && r != '’' {
			return false
		}
	}
	return w != ""
}

// missing returns the words of ws that b does not mention.
func missing(ws []string, b *text) []string {
	var out []string
	for _, w := range ws {
		if !b.mentions(w) {
			out = append(out, w)
		}
	}
	return out
}

// sameSet reports whether a and b hold the same strings, ignoring order and
// repeats.
func sameSet(a, b []string) bool {
	return subset(a, b) && subset(b, a)
}

func subset(a, b []string) bool {
	for _, x := range a {
		found := false
		for _, y := range b {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// oppositeSides reports whether a uses one side of an opposites group that b
// uses only the other side of ("best" vs "worst").
func oppositeSides(a, b *text) bool {
	for _, ta := range a.toks {
		ga := ta.in.opp
		if ga < 0 {
			continue
		}
		other, same := false, false
		for _, tb := range b.toks {
			switch tb.in.opp {
			case ga:
				same = true
			case ga ^ 1:
				other = true
			}
		}
		if other && !same {
			return true
		}
	}
	return false
}

// swapped reports whether a and b put the same two content words on opposite
// sides of the same direction word: "from Delhi to Mumbai" vs "from Mumbai to
// Delhi", "is X better than Y" vs "is Y better than X".
func swapped(a, b *text) bool {
	if entitiesSwapped(a, b) || contentSwapped(a, b) {
		return true
	}
	for i, ta := range a.toks {
		if ta.in.flags&fDir == 0 {
			continue
		}
		for j, tb := range b.toks {
			if tb.low != ta.low {
				continue
			}
			if crosses(a, i, b, j) {
				return true
			}
		}
	}
	return false
}

// crosses reports whether some content word x stands before a.toks[i] in a
// and after b.toks[j] in b, while another, y, stands after it in a and before
// it in b (each within the direction word's sentence).
func crosses(a *text, i int, b *text, j int) bool {
	x, y := false, false
	for _, w := range sentence(a, i, -1) {
		if contains(sentence(b, j, +1), w) {
			x = true
			break
		}
	}
	if !x {
		return false
	}
	for _, w := range sentence(a, i, +1) {
		if contains(sentence(b, j, -1), w) {
			y = true
			break
		}
	}
	return y
}

// sentence returns the tokens of t's sentence around index i, before it
// (dir < 0) or after it (dir > 0).
func sentence(t *text, i, dir int) []token {
	if dir < 0 {
		s := i
		for s > 0 && !t.toks[s].start {
			s--
		}
		return t.toks[s:i]
	}
	e := i + 1
	for e < len(t.toks) && !t.toks[e].start {
		e++
	}
	return t.toks[i+1 : e]
}

func contains(toks []token, w token) bool {
	if w.in.flags&(fStop|fNeg) != 0 {
		return false
	}
	for _, t := range toks {
		if t.low == w.low {
			return true
		}
	}
	return false
}

// intent returns the question word that opens t's first sentence when it
// asks for a reason, a place, a time, a person or a manner (why, where,
// when, who, how), or "" for any other opening ("what", "which", "is",
// "can"…), which many phrasings share.
func intent(t *text) string {
	if len(t.toks) == 0 {
		return ""
	}
	switch w := t.toks[0].low; w {
	case "why", "where", "when", "who", "how":
		return w
	case "whom", "whose":
		return "who"
	}
	return ""
}

// askDifferently reports whether one text asks why, where, when or who and
// the other opens with another of those or with how: "Why is overtime
// taxed?" and "How is overtime taxed?" want different answers.
func askDifferently(a, b *text) bool {
	ia, ib := intent(a), intent(b)
	if ia == ib || ia == "" || ib == "" {
		return false
	}
	return ia != "how" || ib != "how"
}

// connectors may stand between two entities without giving them roles:
// "SRM or VIT" asks what "VIT or SRM" asks.
var connectors = set("and", "or", "nor", "vs", "versus", "v", "with", "plus", "&",
	"between", "both", "either", "neither", "the", "a", "an")

// roleNouns are the people words whose roles decide an answer.
var roleNouns = set("man", "men", "woman", "women", "boy", "boys", "girl", "girls",
	"guy", "guys", "husband", "wife", "boyfriend", "girlfriend", "father", "mother",
	"dad", "mom", "son", "daughter", "brother", "sister", "male", "female", "males",
	"females", "parents", "children", "kids", "teacher", "student", "students",
	"employer", "employee", "buyer", "seller", "landlord", "tenant")

// isEntity reports whether tk is a name (capitalised mid-sentence, or all
// caps) or a role noun (girls, husband): words whose roles decide the answer.
func isEntity(tk token) bool {
	if roleNouns[tk.low] {
		return true
	}
	if !isAlpha(tk.raw) || tk.low == "i" {
		return false
	}
	allCaps := isAllCaps(tk.raw)
	return allCaps || (!tk.start && isCapitalised(tk.raw) && tk.in.flags&fStop == 0)
}

// entitiesSwapped reports whether two entities that both texts mention
// stand in opposite order, with something other than connectors and
// entities between them: "Will India attack Pakistan?" vs "Will Pakistan
// attack India?", "Do guys like introvert girls?" vs "Do girls like
// introvert guys?".
func entitiesSwapped(a, b *text) bool {
	for i := range a.toks {
		x := a.toks[i]
		if !isEntity(x) {
			continue
		}
		bx := indexLow(b, x.low)
		if bx < 0 || countLow(a, x.low) > 1 || countLow(b, x.low) > 1 {
			continue
		}
		for j := i + 1; j < len(a.toks); j++ {
			y := a.toks[j]
			if y.low == x.low || !isEntity(y) {
				continue
			}
			by := indexLow(b, y.low)
			if by < 0 || by > bx || countLow(a, y.low) > 1 || countLow(b, y.low) > 1 {
				continue
			}
			if roleWords(a.toks[i+1:j]) && roleWords(b.toks[by+1:bx]) {
				return true
			}
		}
	}
	return false
}

// roleWords reports whether toks hold a content word that is neither a
// connector nor an entity, such as the verb in "India attacks Pakistan".
// Prepositions alone ("BBA in India" vs "India for BBA") do not count.
func roleWords(toks []token) bool {
	for _, t := range toks {
		if t.stem != "" && !connectors[t.low] && !isEntity(t) {
			return true
		}
	}
	return false
}

func countLow(t *text, w string) int {
	n := 0
	for i := range t.toks {
		if t.toks[i].low == w {
			n++
		}
	}
	return n
}

func indexLow(t *text, w string) int {
	for i := range t.toks {
		if t.toks[i].low == w {
			return i
		}
	}
	return -1
}

// contentSwapped reports whether two content words x and y, each once in
// both texts, stand as "x … z … y" in one and "y … z … x" in the other
// around a content word z that both put between them: "Can data science
// graduates apply for psychology?" vs "Can psychology graduates apply for
// data science?", "What do Indians find annoying in foreigners?" vs "What
// do foreigners find annoying about Indians?". The shared middle word is
// what gives x and y their roles; a clause that merely moves ("In Python,
// how do I reverse a list?") has none.
func contentSwapped(a, b *text) bool {
	for i := range a.toks {
		x := a.toks[i].stem
		if x == "" || countStem(a, x) != 1 || countStem(b, x) != 1 {
			continue
		}
		bx := indexStem(b, x)
		for j := i + 2; j < len(a.toks) && j-i <= swapSpan && !a.toks[j].start; j++ {
			y := a.toks[j].stem
			if y == "" || y == x || countStem(a, y) != 1 || countStem(b, y) != 1 {
				continue
			}
			by := indexStem(b, y)
			if by >= bx || bx-by > swapSpan || !oneSentence(b, by, bx) {
				continue
			}
			for k := i + 1; k < j; k++ {
				z := a.toks[k].stem
				if z == "" || z == x || z == y {
					continue
				}
				if p := indexStem(b, z); p > by && p < bx {
					return true
				}
			}
		}
	}
	return false
}

// swapSpan is how far apart, in words, two swapped content words may
// stand: roles are given within a clause.
const swapSpan = 6

// oneSentence reports whether t.toks[i:j+1] lie in one sentence.
func oneSentence(t *text, i, j int) bool {
	for k := i + 1; k <= j; k++ {
		if t.toks[k].start {
			return false
		}
	}
	return true
}

func countStem(t *text, s string) int {
	n := 0
	for i := range t.toks {
		if t.toks[i].stem == s {
			n++
		}
	}
	return n
}

func indexStem(t *text, s string) int {
	for i := range t.toks {
		if t.toks[i].stem == s {
			return i
		}
	}
	return -1
}

// Directive words tell a model how to answer rather than what the question
// is about. They are stop words or fillers to the content rule, so "How do I
// reset my password? just say yes" passed every rule at cosine 0.96 (issue
// 42). Two kinds:
//
//   - an instruction verb in the bare form an imperative takes (say, reply,
//     respond, repeat, print, output, ignore, disregard, pretend,
//     roleplay, translate), unless a subject, "to" or a determiner comes
//     right before it (or a subject before its modal): "what would you say",
//     "how to say", "the reply" ask a question, they do not instruct;
//   - a bare answer word (yes, yeah, yep, nope, ok, okay), unless "it",
//     "is" or another form of "be" comes right before "ok"/"okay" ("is it
//     okay to…").
var (
	directiveVerbs = set("say", "reply", "respond", "repeat", "print", "output", "ignore",
		"disregard", "pretend", "roleplay", "translate")
	answerWords = set("yes", "yeah", "yep", "nope", "ok", "okay")
	subjects    = set("i", "you", "we", "they", "he", "she", "it", "one", "people", "someone",
		"somebody", "everyone", "everybody", "who", "u", "guys", "person")
	modals = set("would", "could", "can", "do", "does", "did", "will", "should", "shall", "may",
		"might", "must", "not", "cannot", "dont", "didnt", "doesnt")
	determiners = set("the", "a", "an", "my", "your", "his", "her", "their", "our", "its", "this",
		"that", "any", "no", "every", "each", "which", "what", "whose")
	copulas = set("it", "is", "be", "am", "are", "was", "were", "been", "being", "its", "it's", "seem", "feel")
)

// directiveWords returns the directive words of t.
func directiveWords(t *text) []string {
	var out []string
	prev := func(k int) string {
		if k < 0 || t.toks[k+1].start {
			return ""
		}
		return t.toks[k].low
	}
	for i, tk := range t.toks {
		if tk.other || tk.code {
			continue
		}
		switch {
		case directiveVerbs[tk.low]:
			p := prev(i - 1)
			if subjects[p] || determiners[p] || p == "to" || (modals[p] && subjects[prev(i-2)]) {
				continue
			}
		case answerWords[tk.low]:
			if (tk.low == "ok" || tk.low == "okay") && copulas[prev(i-1)] {
				continue
			}
		default:
			continue
		}
		out = append(out, tk.low)
	}
	return out
}
