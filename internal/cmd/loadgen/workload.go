package loadgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

// Item is one question of a workload, with an optional paraphrase that a
// later request may ask instead, and an optional second one.
type Item struct {
	Question   string
	Paraphrase string // empty: the question has none
	// Another is a second paraphrase. A plan asks it only when its mix
	// wants more paraphrases than new questions (30 % beside 50 % repeats),
	// which first paraphrases alone cannot give, and no first paraphrase is
	// unasked: plans of other mixes are what they were without it. Empty:
	// none.
	Another string
}

// Kinds of request in a plan.
const (
	KindNew        = "new"
	KindRepeat     = "repeat"
	KindParaphrase = "paraphrase"
)

// Request is one scheduled question.
type Request struct {
	Question string
	Kind     string
}

// Mix says how a plan draws its requests.
type Mix struct {
	// Repeat is the share of requests that ask again, word for word, a
	// question asked before, chosen by Zipf rank (earlier questions are
	// more popular).
	Repeat float64
	// Paraphrase is the share of requests that ask the paraphrase of a
	// question asked before (chosen by Zipf rank among those whose
	// paraphrase is still unasked).
	Paraphrase float64
	// Zipf is the exponent s of the popularity law, > 1. Zero: 1.1.
	Zipf float64
	// Seed makes the plan reproducible. Zero: 1.
	Seed uint64
}

// Plan draws n requests from items. The rest of the share (1 − Repeat −
// Paraphrase) asks new questions in the items' order. When a kind is not
// possible yet (nothing asked, no unasked paraphrase, items exhausted) the
// request falls back to another kind, so the achieved shares can differ
// slightly from the mix; Kind records what was drawn.
func Plan(items []Item, n int, m Mix) []Request {
	if m.Zipf <= 1 {
		m.Zipf = 1.1
	}
	if m.Seed == 0 {
		m.Seed = 1
	}
	rng := rand.New(rand.NewPCG(m.Seed, 0x10ad))
	useSpare := m.Paraphrase > 1-m.Repeat-m.Paraphrase
	var (
		asked   []string // distinct texts asked so far, in first-ask order
		pending []int    // items asked whose paraphrase is unasked
		spare   []string // second paraphrases of items whose first was asked
		next    int      // next new item
		out     = make([]Request, 0, n)
	)
	zipf := func(size int) int {
		if size <= 1 {
			return 0
		}
		return int(rand.NewZipf(rng, m.Zipf, 1, uint64(size-1)).Uint64())
	}
	askNew := func() bool {
		if next >= len(items) {
			return false
		}
		it := items[next]
		if it.Paraphrase != "" {
			pending = append(pending, next)
		}
		next++
		asked = append(asked, it.Question)
		out = append(out, Request{Question: it.Question, Kind: KindNew})
		return true
	}
	askRepeat := func() bool {
		if len(asked) == 0 {
			return false
		}
		out = append(out, Request{Question: asked[zipf(len(asked))], Kind: KindRepeat})
		return true
	}
	askParaphrase := func() bool {
		if len(pending) == 0 {
			if len(spare) == 0 {
				return false
			}
			i := zipf(len(spare))
			q := spare[i]
			spare = append(spare[:i], spare[i+1:]...)
			asked = append(asked, q)
			out = append(out, Request{Question: q, Kind: KindParaphrase})
			return true
		}
		i := zipf(len(pending))
		it := items[pending[i]]
		pending = append(pending[:i], pending[i+1:]...)
		if useSpare && it.Another != "" {
			spare = append(spare, it.Another)
		}
		asked = append(asked, it.Paraphrase)
		out = append(out, Request{Question: it.Paraphrase, Kind: KindParaphrase})
		return true
	}
	for len(out) < n {
		r := rng.Float64()
		var order []func() bool
		switch {
		case r < m.Repeat:
			order = []func() bool{askRepeat, askNew, askParaphrase}
		case r < m.Repeat+m.Paraphrase:
			order = []func() bool{askParaphrase, askNew, askRepeat}
		default:
			order = []func() bool{askNew, askParaphrase, askRepeat}
		}
		ok := false
		for _, f := range order {
			if ok = f(); ok {
				break
			}
		}
		if !ok {
			break // no items at all
		}
	}
	return out
}

// LoadQQP reads Quora-question-pair lines {"a","b","duplicate"}: every a is a
// question, and the b of a duplicate pair is its paraphrase. Items are
// shuffled by seed so different seeds ask different questions.
func LoadQQP(path string, seed uint64) ([]Item, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open pairs: %w", err)
	}
	defer f.Close()
	var items []Item
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var p struct {
			A, B      string
			Duplicate bool
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("read pairs %s:%d: %w", path, line, err)
		}
		it := Item{Question: p.A}
		if p.Duplicate && p.B != p.A {
			it.Paraphrase = p.B
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read pairs: %w", err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("read pairs %s: no pairs", path)
	}
	shuffle(items, seed)
	return items, nil
}

// LoadQuestions reads one question per line; a TAB separates a question from
// its paraphrase. Blank lines and lines starting with # are skipped. The
// order is kept.
func LoadQuestions(path string) ([]Item, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workload: %w", err)
	}
	var items []Item
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		q, p, _ := strings.Cut(line, "\t")
		items = append(items, Item{Question: strings.TrimSpace(q), Paraphrase: strings.TrimSpace(p)})
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("read workload %s: no questions", path)
	}
	return items, nil
}

// Builtin is a synthetic workload that needs no file: programming questions
// ("How do I reverse a list in Python?"), each with a light paraphrase
// ("How can I reverse a list in Python?") and a second one ("How would I
// reverse a list in Python?"). It is what a fresh clone's demo runs; use
// -workload qqp for real paraphrases.
func Builtin(seed uint64) []Item {
	tasks := []string{
		"reverse a list", "sort a map by value", "read a file line by line", "parse a JSON document",
		"make an HTTP request", "format a date", "split a string on commas", "remove duplicates from a list",
		"check if a file exists", "convert a string to an integer", "write unit tests", "handle errors",
		"read environment variables", "start a background job", "measure elapsed time", "generate a random number",
		"connect to a PostgreSQL database", "parse command-line flags", "compress a file with gzip", "hash a password",
		"merge two sorted lists", "find the largest element of an array", "iterate over a dictionary", "copy a directory",
		"send an email", "serialize an object to YAML", "profile memory usage", "limit the rate of requests",
		"read a CSV file", "download a file", "validate an email address", "calculate a SHA-256 checksum",
	}
	langs := []string{"Python", "Go", "Rust", "Java", "JavaScript", "TypeScript", "C#", "Ruby", "Kotlin", "Swift"}
	forms := [][3]string{
		{"How do I %s in %s?", "How can I %s in %s?", "How would I %s in %s?"},
		{"What is the best way to %s in %s?", "What's the best way to %s in %s?", "Which is the best way to %s in %s?"},
		{"What is the easiest way to %s in %s?", "What is the simplest way to %s in %s?", "What's the easiest way to %s in %s?"},
	}
	var items []Item
	for i, task := range tasks {
		for j, lang := range langs {
			f := forms[(i+j)%len(forms)]
			items = append(items, Item{Question: fmt.Sprintf(f[0], task, lang), Paraphrase: fmt.Sprintf(f[1], task, lang),
				Another: fmt.Sprintf(f[2], task, lang)})
		}
	}
	shuffle(items, seed)
	return items
}

func shuffle(items []Item, seed uint64) {
	if seed == 0 {
		seed = 1
	}
	rng := rand.New(rand.NewPCG(seed, 0x5f0f))
	rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
}
