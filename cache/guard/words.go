package guard

// Word tables. They are small on purpose: each entry is a kind of mistake
// seen in Quora Question Pairs non-duplicates that a sentence encoder scores
// as near-identical (docs/PRECISION.md), not a list fitted to that file.

var negations = set("not", "no", "never", "none", "nobody", "nothing", "nowhere",
	"neither", "nor", "without", "cannot", "cant", "dont", "doesnt", "didnt", "isnt",
	"arent", "wasnt", "werent", "shouldnt", "couldnt", "wouldnt", "havent", "hasnt",
	"hadnt", "mustnt", "aint", "wont")

// stop words are skipped when the order rule looks for the content words
// around a direction word, and are never taken for names when capitalised.
var stop = set("a", "an", "the", "is", "are", "was", "were", "be", "been", "being",
	"am", "do", "does", "did", "how", "what", "why", "when", "where", "which", "who",
	"whom", "whose", "can", "could", "should", "would", "will", "shall", "may",
	"might", "must", "i", "me", "my", "mine", "you", "your", "yours", "we", "our",
	"they", "them", "their", "he", "she", "it", "its", "his", "her", "him", "of",
	"in", "on", "at", "by", "for", "with", "about", "as", "and", "or", "but", "if",
	"so", "that", "this", "these", "those", "there", "here", "some", "any", "all",
	"get", "have", "has", "had", "way", "ways", "to", "from", "than", "into", "over",
	"onto", "toward", "towards", "whats", "hows", "whys", "im", "ive", "id", "ill",
	"please", "quora", "anyone", "someone", "one", "other", "another", "also",
	"very", "really", "much", "many", "more", "most", "good", "best", "better",
	"thing", "things", "people", "person", "like", "just", "then", "out", "up",
	"not", "no", "yes", "ok", "okay", "hi", "hello", "dear", "thanks", "thank",
	"vs", "versus", "between", "among", "each", "every", "both", "either", "own")

// direction words make "X <d> Y" mean something else than "Y <d> X".
var directions = set("to", "from", "into", "than", "over", "onto", "toward", "towards", "about", "against")

var monthNames = map[string]string{
	"january": "january", "jan": "january", "february": "february", "feb": "february",
	"march": "march", "april": "april", "apr": "april", "may": "may", "june": "june",
	"jun": "june", "july": "july", "jul": "july", "august": "august", "aug": "august",
	"september": "september", "sep": "september", "sept": "september",
	"october": "october", "oct": "october", "november": "november", "nov": "november",
	"december": "december", "dec": "december",
	"monday": "monday", "tuesday": "tuesday", "wednesday": "wednesday",
	"thursday": "thursday", "friday": "friday", "saturday": "saturday", "sunday": "sunday",
	"today": "today", "tomorrow": "tomorrow", "yesterday": "yesterday", "tonight": "tonight",
}

// ambiguousDates are date words only when capitalised inside a sentence
// ("in May", not "may I", "march on", "Sep" rather than "sep").
var ambiguousDates = set("may", "march", "jan", "apr", "jun", "jul", "aug", "sep",
	"sept", "oct", "nov", "dec", "feb")

var numberWords = map[string]float64{
	"zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
	"fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
	"nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
	"sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
	"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
	"eighth": 8, "ninth": 9, "tenth": 10, "twice": 2, "thrice": 3,
	"single": 1, "double": 2, "triple": 3,
}

var multipliers = map[string]float64{
	"hundred": 100, "hundreds": 100, "thousand": 1e3, "thousands": 1e3, "k": 1e3,
	"million": 1e6, "millions": 1e6, "mn": 1e6, "billion": 1e9, "billions": 1e9,
	"bn": 1e9, "trillion": 1e12, "lakh": 1e5, "lakhs": 1e5, "lac": 1e5, "lacs": 1e5,
	"crore": 1e7, "crores": 1e7, "cr": 1e7, "dozen": 12,
}

// currencies map a currency word or symbol to its code; before or after a
// number it becomes part of the amount ("Rs. 500" = "500 rupees").
var currencies = map[string]string{
	"$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "bucks": "usd",
	"₹": "inr", "rs": "inr", "inr": "inr", "rupee": "inr", "rupees": "inr",
	"€": "eur", "eur": "eur", "euro": "eur", "euros": "eur",
	"£": "gbp", "gbp": "gbp", "pound": "gbp", "pounds": "gbp", "¥": "jpy", "yen": "jpy",
}

// units after a number become part of it ("6 months" differs from "6 weeks").
var units = map[string]string{
	"%": "%", "percent": "%", "percentage": "%", "kg": "kg", "kgs": "kg", "kilo": "kg",
	"kilos": "kg", "kilogram": "kg", "kilograms": "kg", "g": "g", "gram": "g",
	"grams": "g", "lb": "lb", "lbs": "lb", "km": "km", "kms": "km", "kilometer": "km",
	"kilometers": "km", "kilometre": "km", "kilometres": "km", "mile": "mile",
	"miles": "mile", "m": "m", "meter": "m", "meters": "m", "metre": "m", "metres": "m",
	"cm": "cm", "mm": "mm", "ft": "ft", "feet": "ft", "foot": "ft", "inch": "in",
	"inches": "in", "gb": "gb", "mb": "mb", "tb": "tb", "kb": "kb", "ghz": "ghz",
	"mhz": "mhz", "mp": "mp", "mah": "mah", "hour": "h", "hours": "h", "hr": "h",
	"hrs": "h", "minute": "min", "minutes": "min", "min": "min", "mins": "min",
	"second": "s", "seconds": "s", "sec": "s", "secs": "s", "day": "day",
	"days": "day", "week": "week", "weeks": "week", "month": "month", "months": "month",
	"year": "year", "years": "year", "yrs": "year", "yr": "year", "kw": "kw", "w": "w",
	"watt": "w", "watts": "w", "v": "v", "volt": "v", "volts": "v", "l": "l",
	"litre": "l", "liter": "l", "litres": "l", "liters": "l", "ml": "ml",
	"degree": "deg", "degrees": "deg", "kmph": "kmh", "mph": "mph", "p": "p",
	"fps": "fps", "rpm": "rpm", "bhk": "bhk", "cc": "cc", "x": "x",
}

// opposites: word → group*2 + side. Two queries that use opposite sides of
// one group ("best"/"worst", "husband"/"wife") ask different questions.
var opposites = func() map[string]int {
	pairs := [][2][]string{
		{{"best"}, {"worst"}},
		{{"better"}, {"worse"}},
		{{"good"}, {"bad"}},
		{{"most"}, {"least"}},
		{{"more"}, {"less", "fewer"}},
		{{"largest", "biggest"}, {"smallest"}},
		{{"highest"}, {"lowest"}},
		{{"higher"}, {"lower"}},
		{{"bigger", "larger"}, {"smaller"}},
		{{"longest"}, {"shortest"}},
		{{"longer"}, {"shorter"}},
		{{"fastest"}, {"slowest"}},
		{{"faster"}, {"slower"}},
		{{"strongest"}, {"weakest"}},
		{{"richest"}, {"poorest"}},
		{{"cheapest"}, {"costliest"}},
		{{"cheaper"}, {"costlier"}},
		{{"easiest"}, {"hardest"}},
		{{"easier"}, {"harder"}},
		{{"oldest"}, {"youngest", "newest"}},
		{{"older"}, {"younger"}},
		{{"maximum", "max"}, {"minimum", "min"}},
		{{"advantage", "advantages", "pros", "benefits"}, {"disadvantage", "disadvantages", "cons", "drawbacks"}},
		{{"increase", "increasing"}, {"decrease", "decreasing", "reduce", "reducing"}},
		{{"gain", "gaining"}, {"lose", "losing"}},
		{{"buy", "buying"}, {"sell", "selling"}},
		{{"before"}, {"after"}},
		{{"male", "males"}, {"female", "females"}},
		{{"man", "men"}, {"woman", "women"}},
		{{"boy", "boys", "guy", "guys"}, {"girl", "girls"}},
		{{"husband"}, {"wife"}},
		{{"boyfriend"}, {"girlfriend"}},
		{{"father", "dad"}, {"mother", "mom", "mum"}},
		{{"son"}, {"daughter"}},
		{{"brother"}, {"sister"}},
		{{"he", "him", "his"}, {"she", "her", "hers"}},
		{{"positive"}, {"negative"}},
		{{"import", "imports"}, {"export", "exports"}},
		{{"upload"}, {"download"}},
		{{"input"}, {"output"}},
		{{"rich"}, {"poor"}},
		{{"legal"}, {"illegal"}},
		{{"possible"}, {"impossible"}},
		{{"win", "winning"}, {"lose", "losing"}},
		{{"pass"}, {"fail"}},
		{{"online"}, {"offline"}},
		{{"introvert", "introverts"}, {"extrovert", "extroverts"}},
		{{"north", "northern"}, {"south", "southern"}},
		{{"east", "eastern"}, {"west", "western"}},
		{{"first"}, {"last"}},
		{{"love"}, {"hate"}},
		{{"start", "starting"}, {"stop", "stopping", "quit", "quitting"}},
		{{"hot"}, {"cold"}},
		{{"success", "successful"}, {"failure", "unsuccessful"}},
		{{"private"}, {"public"}},
		{{"true"}, {"false"}},
		{{"up"}, {"down"}},
	}
	m := make(map[string]int)
	for g, p := range pairs {
		for side, words := range p {
			for _, w := range words {
				if _, dup := m[w]; !dup {
					m[w] = g*2 + side
				}
			}
		}
	}
	return m
}()

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// Word flags.
const (
	fStop      = 1 << iota // a stop word
	fLight                 // a filler the content rule ignores
	fNeg                   // a negation
	fDir                   // a direction word of the order rule
	fAmbigDate             // a date word only when capitalised mid-sentence
	fNum                   // a number word (num holds its value)
)

// info is everything the tables say about one lower-cased word, so that
// each token costs one map lookup.
type info struct {
	flags uint8
	opp   int16 // opposites group*2+side, or -1
	num   float64
	mul   float64 // magnitude (hundred, k, lakh), or 0
	cur   string  // currency code
	unit  string  // unit code
	month string  // canonical date word
	syn   string  // synonym stem
}

var lexicon = func() map[string]*info {
	m := make(map[string]*info)
	get := func(w string) *info {
		if i, ok := m[w]; ok {
			return i
		}
		i := &info{opp: -1}
		m[w] = i
		return i
	}
	for w := range stop {
		get(w).flags |= fStop
	}
	for w := range light {
		get(w).flags |= fLight
	}
	for w := range negations {
		get(w).flags |= fNeg
	}
	for w := range directions {
		get(w).flags |= fDir
	}
	for w := range ambiguousDates {
		get(w).flags |= fAmbigDate
	}
	for w, v := range numberWords {
		i := get(w)
		i.flags |= fNum
		i.num = v
	}
	for w, v := range multipliers {
		get(w).mul = v
	}
	for w, c := range currencies {
		get(w).cur = c
	}
	for w, u := range units {
		get(w).unit = u
	}
	for w, d := range monthNames {
		get(w).month = d
	}
	for w, g := range opposites {
		get(w).opp = int16(g)
	}
	for w, s := range synonyms {
		get(w).syn = s
	}
	return m
}()

// noInfo stands for words the tables do not know.
var noInfo = &info{opp: -1}

func lookup(w string) *info {
	if i, ok := lexicon[w]; ok {
		return i
	}
	return noInfo
}

// scaffold verbs frame a question rather than ask it: opinion, perception
// ("What do you think of X?" asks "What is your
// opinion of X?"). The content rule ignores them and their inflections.
var scaffold = set("think", "feel", "believe", "tell", "seem")

// irregular maps common irregular English forms to their lemma, so that the
// content rule sees "made" as "make" and "children" as "child".
var irregular = map[string]string{
	"made": "make", "got": "get", "gotten": "get", "took": "take", "taken": "take",
	"gave": "give", "given": "give", "went": "go", "gone": "go", "saw": "see",
	"seen": "see", "found": "find", "thought": "think", "bought": "buy",
	"brought": "bring", "felt": "feel", "kept": "keep", "left": "leave",
	"lost": "lose", "told": "tell", "said": "say", "became": "become",
	"began": "begin", "begun": "begin", "wrote": "write", "written": "write",
	"knew": "know", "known": "know", "did": "do", "done": "do", "ran": "run",
	"paid": "pay", "sold": "sell", "sent": "send", "spent": "spend", "built": "build",
	"taught": "teach", "understood": "understand", "chose": "choose",
	"chosen": "choose", "ate": "eat", "eaten": "eat", "fell": "fall", "fallen": "fall",
	"drove": "drive", "driven": "drive", "spoke": "speak", "spoken": "speak",
	"broke": "break", "broken": "break", "forgot": "forget", "forgotten": "forget",
	"held": "hold", "met": "meet", "grew": "grow", "grown": "grow", "won": "win",
	"led": "lead", "meant": "mean", "slept": "sleep", "stood": "stand",
	"caught": "catch", "fought": "fight", "sought": "seek", "struck": "strike",
	"drew": "draw", "drawn": "draw", "flew": "fly", "flown": "fly", "threw": "throw",
	"thrown": "throw", "wore": "wear", "worn": "wear", "hid": "hide", "hidden": "hide",
	"rode": "ride", "ridden": "ride", "rose": "rise", "risen": "rise", "sang": "sing",
	"sung": "sing", "swam": "swim", "swum": "swim", "drank": "drink", "drunk": "drink",
	"heard": "hear", "lent": "lend", "built-in": "builtin", "dealt": "deal",
	"learnt": "learn", "burnt": "burn", "spelt": "spell", "dreamt": "dream",
	"men": "man", "women": "woman", "children": "child", "feet": "foot",
	"teeth": "tooth", "mice": "mouse", "geese": "goose", "lives": "life",
	"wives": "wife", "knives": "knife", "leaves": "leaf", "halves": "half",
	"shelves": "shelf", "wolves": "wolf", "thieves": "thief", "better": "good",
	"best": "good", "worse": "bad", "worst": "bad",
	"is": "be", "are": "be", "was": "be", "were": "be", "been": "be", "am": "be",
	"has": "have", "had": "have", "does": "do",
}
