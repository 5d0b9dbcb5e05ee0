package guard

import "strings"

// light words carry little of a question's answer: question scaffolding and
// common fillers. The content rule ignores them.
var light = set("some", "any", "really", "actually", "exactly", "possible", "ever",
	"top", "great", "things", "kind", "kinds", "type", "types",
	"tips", "tip", "advice",
	"example", "examples", "mean", "means", "meaning", "etc", "still",
	"go", "going", "goes", "getting", "doing", "done", "happen", "happens",
	"a", "i", "s", "t", "d", "m", "o", "u", "y",
	"reason", "reasons", "anything", "something", "everything", "always", "often",
	"usually", "generally", "basically", "simply", "only", "well", "too", "now",
	"currently", "nowadays", "able", "possibly", "certain", "specific", "particular",
	"important", "ideas", "idea", "suggest", "suggestions", "recommend",
	"please", "guys", "know", "we're",
	"youre", "theyre", "ive", "youve", "weve", "theyve", "id", "youd", "hed", "shed",
	"ill", "youll", "its", "hes", "shes", "thats", "theres", "lets", "let", "say", "said",
	"s", "t", "d", "ll", "re", "ve", "m", "yourself", "myself", "themselves",
	"himself", "herself", "itself", "ourselves", "anyone", "everyone", "somebody",
	"anybody", "whether", "while", "since", "because", "via", "per", "within",
	"during", "own", "able",
	"likely", "often", "such", "whats", "hows", "whys", "wheres", "whos", "who",
	"am", "much", "available", "overall", "common", "opinion", "again", "exact",
	"actual", "widely", "right", "all")

// synonyms maps words to a shared stem so that common paraphrases still hit.
var synonyms = map[string]string{
	"greatest": "best", "finest": "best", "top": "best", "good": "best", "great": "best",
	"nice": "best", "excellent": "best", "ideal": "ideal", "large": "big", "huge": "big",
	"purchase": "buy", "method": "way", "methods": "way", "study": "learn",
	"studying": "learn", "learning": "learn", "begin": "start", "beginning": "start",
	"quick": "fast", "quickly": "fast", "fastest": "fast", "simple": "easy",
	"easiest": "easy", "easily": "easy", "film": "movie", "films": "movie",
	"movies": "movie", "kid": "child", "kids": "child", "children": "child",
	"mobile": "phone", "cellphone": "phone", "smartphone": "phone", "job": "job",
	"earn": "make", "income": "money", "cash": "money", "gf": "girlfriend",
	"bf": "boyfriend", "pc": "computer", "laptop": "computer", "difficult": "hard",
	"tough": "hard", "toughest": "hard", "hardest": "hard", "prepare": "prepare",
	"preparation": "prepare", "improve": "improve", "enhance": "improve",
	"boost": "improve", "increase": "improve", "create": "make", "build": "make",
	"picture": "photo", "pictures": "photo", "pic": "photo", "pics": "photo",
	"image": "photo", "images": "photo", "photograph": "photo",
	"determine": "calculate", "compute": "calculate", "measure": "calculate",
	"remove": "remove", "eliminate": "remove", "rid": "remove", "delete": "remove",
	"biggest": "big", "bigger": "big", "favourite": "favorite", "colour": "color",
	"behaviour": "behavior", "centre": "center", "programme": "program",
	"realise": "realize", "organise": "organize", "analyse": "analyze",
}

// stem reduces w to the key the content rule compares: a rough lemma
// (see base), then a shared key for words the synonym table joins.
func stem(w string) string {
	b := base(w)
	if s, ok := synonymStems[b]; ok {
		return s
	}
	return b
}

// base is a light, rule-based English lemmatiser, applied the same way to
// both texts so that the inflections of one word meet on one key:
//
//   - irregular forms map to their lemma (made → make, children → child);
//   - hyphens go (e-books → ebooks);
//   - plural and third-person -s/-es/-ies, -ed/-ied, -ing and -ly go, with a
//     doubled final consonant undone (stopped → stop, running → run);
//   - British spellings take the American form (-our → -or, -ise → -ize,
//     -yse → -yze, -tre → -ter, -ogue → -og);
//   - a final silent e, y or i goes, so that make/makes/making/made,
//     study/studies/studied and movie/movies each end on one key.
//
// The key is not a word ("mak", "stud"); it is only ever compared with
// another key. Only hyphenated and British-spelt words allocate.
func base(w string) string {
	if l, ok := irregular[w]; ok {
		w = l
	}
	if strings.IndexByte(w, '-') >= 0 {
		w = strings.ReplaceAll(w, "-", "")
	}
	w = inflection(w)
	w = american(w)
	n := len(w)
	if n > 2 && w[n-1] == 'e' && w[n-2] != 'e' {
		w = w[:n-1]
		n--
	}
	if n > 3 && (w[n-1] == 'y' || w[n-1] == 'i') {
		w = w[:n-1]
	}
	return w
}

// inflection strips one regular English inflection from w.
func inflection(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		return w[:n-2] // studies → studi (→ stud, like study)
	case n > 4 && strings.HasSuffix(w, "sses"):
		return w[:n-2]
	case n > 4 && strings.HasSuffix(w, "es") && sibilantEnd(w[:n-2]):
		return w[:n-2] // boxes, watches, wishes, buses
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:n-1] // sites → site, phones → phone
	case n > 4 && strings.HasSuffix(w, "ied"):
		return w[:n-2] // studied → studi
	case n > 3 && strings.HasSuffix(w, "eed"):
		return w // need, speed, proceed
	case n > 3 && strings.HasSuffix(w, "ed") && hasVowel(w[:n-2]):
		return undouble(w[:n-2]) // used → us, stopped → stop
	case n > 4 && strings.HasSuffix(w, "ing") && hasVowel(w[:n-3]) && n-3 >= 2:
		return undouble(w[:n-3]) // making → mak, running → run
	case n > 4 && strings.HasSuffix(w, "ly"):
		return w[:n-2] // quickly → quick, easily → easi
	}
	return w
}

// american rewrites the British endings of w in their American form.
func american(w string) string {
	n := len(w)
	switch {
	case n > 5 && strings.HasSuffix(w, "our"):
		return w[:n-2] + "r" // colour, behaviour, neighbour
	case n > 7 && strings.HasSuffix(w, "isation"):
		return w[:n-6] + "zation"
	case n > 5 && (strings.HasSuffix(w, "ise") || strings.HasSuffix(w, "yse")):
		return w[:n-2] + "ze" // realise, organise, analyse
	case n > 4 && (strings.HasSuffix(w, "is") || strings.HasSuffix(w, "ys")) && !strings.HasSuffix(w, "sis"):
		return w[:n-1] + "z" // realis(ed), analys(ing) after inflection
	case n > 4 && strings.HasSuffix(w, "tre"):
		return w[:n-3] + "ter" // centre, theatre, fibre
	case n > 6 && strings.HasSuffix(w, "ogue"):
		return w[:n-2] // catalogue, dialogue
	}
	return w
}

func sibilantEnd(w string) bool {
	return strings.HasSuffix(w, "s") || strings.HasSuffix(w, "x") || strings.HasSuffix(w, "z") ||
		strings.HasSuffix(w, "ch") || strings.HasSuffix(w, "sh")
}

func hasVowel(w string) bool {
	return strings.ContainsAny(w, "aeiouy")
}

// undouble turns a doubled final consonant into one (stopp → stop); ll, ss
// and zz stay (call, miss, buzz).
func undouble(w string) string {
	n := len(w)
	if n > 2 && w[n-1] == w[n-2] && strings.IndexByte("bdfgmnprt", w[n-1]) >= 0 {
		return w[:n-1]
	}
	return w
}

// synonymStems is the synonym table keyed and valued by base, so that every
// inflection of a synonym ("films", "pictures") finds it.
var synonymStems = func() map[string]string {
	m := make(map[string]string, len(synonyms))
	for k, v := range synonyms {
		m[base(k)] = base(v)
	}
	return m
}()

// ignoredStems are the bases of stop words and fillers: an inflected form
// of one ("having", "gets", "became") is no more a content word than the
// word itself.
var ignoredStems = func() map[string]bool {
	m := make(map[string]bool)
	for _, ws := range []map[string]bool{stop, light, scaffold} {
		for w := range ws {
			// Adverbs keep their adjectives ("really" is light, "real"
			// is not), and "many" is not "man".
			if len(w) >= 3 && !strings.HasSuffix(w, "y") {
				m[base(w)] = true
			}
		}
	}
	return m
}()

// unmatched counts the content words of a (see contentStem) that have no
// counterpart in b: the same stem, a shared prefix of six letters
// ("programming"/"programmer"), or, for a word written with four or more
// letters, a place in b's squashed text ("smart phone" for "smartphone").
// The word as written is looked for, not its stem: a stem such as "stud"
// (study) would otherwise match inside "students".
func unmatched(a, b *text) int {
	n := 0
	for _, ta := range a.toks {
		if ta.stem == "" {
			continue
		}
		found := false
		for _, tb := range b.toks {
			if tb.stem != "" && (ta.stem == tb.stem || commonPrefix(ta.stem, tb.stem) >= minPrefix) {
				found = true
				break
			}
		}
		if !found && !(len(ta.low) >= 4 && isPlain(ta.low) && strings.Contains(b.flat, ta.low)) {
			n++
		}
	}
	return n
}

// contentStem returns the stem of a content word, or "" for words the
// content rule ignores: stop words, fillers, negations, numbers, currencies
// and units (the number rule compares those).
func contentStem(w string, in *info) string {
	if in.flags&(fStop|fLight|fNeg|fNum) != 0 || in.cur != "" || in.unit != "" || in.mul != 0 || !isAlpha(w) {
		return ""
	}
	s := stem(w)
	if ignoredStems[s] {
		return ""
	}
	return s
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// minPrefix is the shared prefix that makes two stems one word
// ("programming"/"programmer"); six keeps "internet" apart from "interview".
const minPrefix = 6
