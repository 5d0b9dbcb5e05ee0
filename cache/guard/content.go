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

// stem reduces w to a rough stem: synonyms share one; plural, -ing, -ed and
// -ly endings go.
func stem(w string) string {
	switch n := len(w); {
	case n > 5 && strings.HasSuffix(w, "ies"):
		w = w[:n-3] + "y"
	case n > 5 && strings.HasSuffix(w, "ing"):
		w = w[:n-3]
	case n > 4 && strings.HasSuffix(w, "ed"):
		w = w[:n-2]
	case n > 4 && strings.HasSuffix(w, "ly"):
		w = w[:n-2]
	case n > 4 && strings.HasSuffix(w, "es"):
		w = w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		w = w[:n-1]
	}
	if s := lookup(w).syn; s != "" {
		return s
	}
	return w
}

// unmatched counts the content words of a (see contentStem) that have no
// counterpart in b: the same stem, a shared
// prefix of six letters ("programming"/"programmer"), or, from four letters,
// a place in b's squashed text ("smart phone" for "smartphone").
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
		if !found && !(len(ta.stem) >= 4 && strings.Contains(b.flat, ta.stem)) {
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
	if in.syn != "" {
		return in.syn
	}
	return stem(w)
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
