package guard

import (
	"sync"
	"testing"
)

func TestCheckRejects(t *testing.T) {
	tests := []struct {
		name, query, candidate, reason string
	}{
		{"currency amount", "Which is the best phone under Rs. 5000?", "Which is the best phone under Rs. 4000?", ReasonNumber},
		{"amount with k", "Which is the best laptop under 30k?", "Which is the best laptop under 40,000?", ReasonNumber},
		{"currency", "Is $500 enough for a week in Goa?", "Is ₹500 enough for a week in Goa?", ReasonNumber},
		{"decimal", "What happens if I take 2.5 mg of melatonin?", "What happens if I take 5 mg of melatonin?", ReasonNumber},
		{"ordinal", "How many people study in 10th grade?", "How many people study in 12th grade?", ReasonNumber},
		{"unit", "How can I lose weight in 6 months?", "How can I lose weight in 6 weeks?", ReasonNumber},
		{"number word", "How do I prepare for NEET in two months?", "How do I prepare for NEET in four months?", ReasonNumber},
		{"magnitude", "I found a few thousand bucks on the street, what now?", "I found a few hundred bucks on the street, what now?", ReasonNumber},
		{"year", "Who won the IPL in 2016?", "Who won the IPL in 2017?", ReasonYear},
		{"added year", "Which was the best movie of 2015?", "Which was the best movie?", ReasonYear},
		{"month", "What is the weather like in Goa in December?", "What is the weather like in Goa in June?", ReasonDate},
		{"name", "What is the best time to visit Croatia?", "What is the best time to visit Australia?", ReasonName},
		{"acronym", "Which is a better college, SRM or VIT?", "Which is a better college, SRM or BITS?", ReasonName},
		{"negation not", "Why do some lions have no mane?", "Why do lions have a mane?", ReasonNegation},
		{"negation n't", "Why can't I sleep at night?", "Why can I sleep at night?", ReasonNegation},
		{"negation without", "How can I improve my handwriting without practicing?", "How can I improve my handwriting?", ReasonNegation},
		{"role swap", "How do I convert PDF to Word?", "How do I convert Word to PDF?", ReasonOrder},
		{"from to swap", "What is the cheapest flight from Delhi to Mumbai?", "What is the cheapest flight from Mumbai to Delhi?", ReasonOrder},
		{"than swap", "Is Python better than Java?", "Is Java better than Python?", ReasonOrder},
		{"snake_case", "What does the max_tokens parameter do?", "What does the top_p parameter do?", ReasonIdentifier},
		{"dotted name", "How do I use os.path.join?", "How do I use os.path.split?", ReasonIdentifier},
		{"camelCase", "Why is getElementById returning null?", "Why is querySelector returning null?", ReasonIdentifier},
		{"backticks", "What does `git rebase` do?", "What does `git merge` do?", ReasonIdentifier},
		{"path", "Why is /etc/hosts ignored?", "Why is /etc/resolv.conf ignored?", ReasonIdentifier},
		{"quoted string", `What does "carpe diem" mean?`, `What does "memento mori" mean?`, ReasonQuoted},
		{"added quote", `What is a business model?`, `What is a "transactional business model"?`, ReasonQuoted},
		{"superlative", "What is the best thing about living in Delhi?", "What is the worst thing about living in Delhi?", ReasonOpposite},
		{"gender", "What are the best qualities to look for in a future husband?", "What are the best qualities to look for in a future wife?", ReasonOpposite},
		{"pros and cons", "What are the advantages of electric cars?", "What are the disadvantages of electric cars?", ReasonOpposite},
		{"agent swap", "What will happen if India attacks Pakistan?", "What will happen if Pakistan attacks India?", ReasonOrder},
		{"role nouns swap", "Do guys like introvert girls?", "Do girls like introvert guys?", ReasonOrder},
		{"language symbols", "What is the best Java book for a C# programmer?", "What is the best Java book for a C++ programmer?", ReasonIdentifier},
		{"why vs how", "Why is overtime taxed?", "How is overtime taxed?", ReasonQuestion},
		{"where vs when", "Where was the wheel invented?", "When was the wheel invented?", ReasonQuestion},
		{"content word", "Can airport security scanners detect gold?", "Can airport security scanners detect diamonds?", ReasonContent},
		{"added qualifier", "What are the best restaurants in town?", "What are the best vegan restaurants in town?", ReasonContent},
		{"roles of common nouns swap", "Can psychology graduates apply for data science?", "Can data science graduates apply for psychology?", ReasonOrder},
		{"one as a numeral", "How can I learn Spanish in one month?", "How can I learn Spanish?", ReasonNumber},
		{"one month vs one year", "How can I learn Spanish in one month?", "How can I learn Spanish in one year?", ReasonNumber},
		{"negation moved", "What can't Muslims do in India but can do in Pakistan?", "What can Muslims do in India but not in Pakistan?", ReasonNegation},
		{"different thing denied", "Why doesn't the doctor call me back?", "Why does the doctor not bill me?", ReasonNegation},
		{"about swap", "What misconceptions do girls have about boys?", "What misconceptions do boys have about girls?", ReasonOrder},
		{"many is not man", "Why is sex important to a man?", "Why is sex important to so many?", ReasonContent},
	}
	g := New(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := g.Check(tt.query, tt.candidate)
			if got, want := ok, false; got != want {
				t.Fatalf("Check(%q, %q) ok = %v, want %v", tt.query, tt.candidate, got, want)
			}
			if got, want := reason, tt.reason; got != want {
				t.Errorf("Check(%q, %q) reason = %q, want %q", tt.query, tt.candidate, got, want)
			}
			// Rules are symmetric: swapping query and candidate rejects too.
			if ok, _ := g.Check(tt.candidate, tt.query); ok {
				t.Errorf("Check(%q, %q) ok = true, want false", tt.candidate, tt.query)
			}
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	tests := []struct {
		name, query, candidate string
	}{
		{"identical", "What is the capital of France?", "What is the capital of France?"},
		{"case", "what is the capital of france?", "What is the capital of FRANCE?"},
		{"punctuation", "How do I learn Go quickly", "How do I learn Go quickly?!"},
		{"word order", "Which is better, SRM or VIT?", "Which is better: VIT or SRM?"},
		{"reordered clause", "In Python, how do I reverse a list?", "How do I reverse a list in Python?"},
		{"negation inverted", "Why don't highways have lights?", "Why do highways not have lights?"},
		{"negation inverted subject", "Why won't my iPhone unlock?", "Why does my iPhone not unlock?"},
		{"both negated alike", "Why can't I sleep at night?", "Why am I not able to sleep at night?"},
		{"negation after the verb", "Why doesn't my phone charge?", "Why is my phone not charging?"},
		{"without for don't have", "I don't have money. How can I start a business?", "How can I start a business without money?"},
		{"contraction what's", "What's the best way to learn guitar?", "What is the best way to learn guitar?"},
		{"contraction can't", "Why can't I sleep?", "Why cannot I sleep?"},
		{"contraction don't", "Why don't cats like water?", "Why do cats not like water?"},
		{"synonym", "What is the best laptop for programming?", "What is the greatest laptop for programming?"},
		{"synonyms", "How can I earn money from YouTube?", "How do I make money on YouTube?"},
		{"plural", "What are the benefits of eating apples?", "What is the benefit of eating an apple?"},
		{"stems", "How do I start programming?", "How do I start to program?"},
		{"same number", "Which is the best phone under Rs. 5000?", "Best phone under 5000 rupees?"},
		{"number spelled", "How do I lose weight in two months?", "How do I lose weight in 2 months?"},
		{"number magnitude", "Which is the best phone under 15k?", "Which is the best phone under 15,000?"},
		{"first word name", "Python: how do I reverse a list?", "How do I reverse a list in Python?"},
		{"compound", "What is the best smartphone for photography?", "What is the best smart phone for photography?"},
		{"british spelling", "What is your favourite colour?", "What is your favorite color?"},
		{"possessive", "What is Modi's view on GST?", "What is the view of Modi on GST?"},
		{"title case", "What Are The Best Bed Sheets?", "What are the best bed sheets?"},
		{"filler", "What are some really good books on history?", "What are good books on history?"},
		{"quoted same", `What does "carpe diem" mean?`, "What does carpe diem mean?"},
		{"symmetric or", "Who will win, Trump or Clinton?", "Who will win, Clinton or Trump?"},
		{"names around vs", "Donald Trump vs Hillary Clinton: who wins?", "Hillary Clinton vs Donald Trump: who wins?"},
		{"names around a preposition", "Which is the best college for BBA in India?", "Which is the best college in India for BBA?"},
		{"dotted name mid-sentence", "Which projects were ported to .NET?", "Which projects have been ported to .NET?"},
		{"nested to", "How do I transfer photos from my phone to my laptop?", "How do I transfer photos from a phone to a laptop?"},
		{"final e", "Which sites are best for learning French?", "What is the best site to learn French?"},
		{"ies and y", "Which countries are the safest to study in?", "What is the safest country for studying?"},
		{"irregular verb", "What made you leave your job?", "What makes you leave a job?"},
		{"doubled consonant", "Is running good for you?", "Is it good to run?"},
		{"british -ise", "How can I minimise stress at work?", "How can I minimize stress at work?"},
		{"british -our", "What is the flavour of durian?", "What is the flavor of durian?"},
		{"british -tre", "Where is the nearest theatre?", "Where is the nearest theater?"},
		{"hyphen", "Where can I download free e-books?", "Where can I download free ebooks?"},
		{"inflected auxiliary", "What is it like having twins?", "What is it like to have twins?"},
		{"opinion verb", "What do you think about Python?", "What is your opinion about Python?"},
		{"one as a pronoun", "Which one is better, iOS or Android?", "Which is better, iOS or Android?"},
		{"numeral one", "How can I learn Spanish in one month?", "How can I learn Spanish in 1 month?"},
		{"ordinal first", "Who was the first president of India?", "Who was the 1st president of India?"},
	}
	g := New(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := g.Check(tt.query, tt.candidate)
			if got, want := ok, true; got != want {
				t.Errorf("Check(%q, %q) = false, %q; want true", tt.query, tt.candidate, reason)
			}
		})
	}
}

func TestBase(t *testing.T) {
	same := [][]string{
		{"make", "makes", "making", "made"},
		{"study", "studies", "studied"},
		{"movie", "movies"},
		{"site", "sites"},
		{"stop", "stops", "stopped", "stopping"},
		{"run", "runs", "running", "ran"},
		{"box", "boxes"},
		{"watch", "watches", "watched", "watching"},
		{"use", "uses", "used", "using"},
		{"child", "children"},
		{"realize", "realise", "realised", "realizing", "realising"},
		{"color", "colour", "colours"},
		{"center", "centre", "centres"},
		{"catalog", "catalogue"},
		{"ebook", "e-book", "e-books"},
		{"easy", "easily"},
	}
	for _, ws := range same {
		for _, w := range ws[1:] {
			if got, want := base(w), base(ws[0]); got != want {
				t.Errorf("base(%q) = %q, want %q (base of %q)", w, got, want, ws[0])
			}
		}
	}
	differ := [][2]string{{"man", "many"}, {"real", "really"}, {"need", "ne"}, {"bus", "bu"}, {"analysis", "analyst"}, {"general", "generally"}}
	for _, p := range differ {
		if p[0] == "many" || p[1] == "many" || p[1] == "really" || p[1] == "generally" {
			// Light words: the content rule ignores them, but not their
			// adjectives or look-alikes.
			if contentStem(p[0], lookup(p[0])) == "" {
				t.Errorf("contentStem(%q) = \"\", want a content word (%q is light)", p[0], p[1])
			}
			continue
		}
		if base(p[0]) == base(p[1]) {
			t.Errorf("base(%q) = base(%q) = %q, want them apart", p[0], p[1], base(p[0]))
		}
	}
}

func TestOptionsDisableRules(t *testing.T) {
	tests := []struct {
		name             string
		opts             Options
		query, candidate string
	}{
		{"numbers", Options{NoNumbers: true}, "Best phone under Rs. 5000?", "Best phone under Rs. 4000?"},
		{"names", Options{NoNames: true, NoContent: true}, "What is the best time to visit Croatia?", "What is the best time to visit Australia?"},
		{"negation", Options{NoNegation: true, NoContent: true}, "Why can't I sleep at night?", "Why can I sleep at night?"},
		{"order", Options{NoOrder: true}, "How do I convert PDF to Word?", "How do I convert Word to PDF?"},
		{"content", Options{NoContent: true}, "Can scanners detect gold?", "Can scanners detect diamonds?"},
		{"tolerance", Options{MaxUnmatched: 2}, "Can scanners detect gold?", "Can scanners detect diamonds?"},
		{"quoted", Options{NoQuoted: true, NoContent: true}, `What does "carpe diem" mean?`, `What does "memento mori" mean?`},
		{"names substituted only", Options{NamesSubstitutedOnly: true, NoContent: true}, "Why did Trump win?", "Why did Donald Trump win?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ok, _ := New(Options{}).Check(tt.query, tt.candidate); ok {
				t.Fatalf("default guard accepts (%q, %q); the case tests nothing", tt.query, tt.candidate)
			}
			if ok, reason := New(tt.opts).Check(tt.query, tt.candidate); !ok {
				t.Errorf("Check(%q, %q) with %+v = false, %q; want true", tt.query, tt.candidate, tt.opts, reason)
			}
		})
	}
}

func TestNilGuardAccepts(t *testing.T) {
	var g *Guard
	if ok, reason := g.Check("a 1", "a 2"); !ok || reason != "" {
		t.Errorf("nil Guard Check = %v, %q; want true, \"\"", ok, reason)
	}
}

func TestCheckConcurrent(t *testing.T) {
	g := New(Options{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if ok, _ := g.Check("Best phone under Rs. 5000?", "Best phone under Rs. 4000?"); ok {
					t.Error("Check accepted different amounts")
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkCheck(b *testing.B) {
	g := New(Options{})
	pairs := [][2]string{
		{"Which is the best phone under Rs. 5000?", "What is the best phone under 5000 rupees in India?"},
		{"How do I convert PDF to Word?", "How can I convert a Word document to PDF?"},
		{"What are some unexpected things first-time visitors to Croatia notice?", "What are some unexpected things first-time visitors to Australia notice?"},
		{"How can I improve my English speaking skills?", "How do I improve my spoken English?"},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := pairs[i%len(pairs)]
		g.Check(p[0], p[1])
	}
}
