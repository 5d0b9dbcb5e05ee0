package evalcmd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
)

// TraceLine is one request of a replay trace: a question and the id of its
// right answer (questions with the same id have the same answer).
type TraceLine struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// ReadTrace reads JSON lines of {"question","answer"}. Blank lines are
// skipped; a line that does not parse or lacks a field is an error naming
// its number.
func ReadTrace(r io.Reader) ([]TraceLine, error) {
	return readLines(r, "read trace", func(l TraceLine) error {
		if l.Question == "" || l.Answer == "" {
			return errors.New(`both "question" and "answer" are required`)
		}
		return nil
	})
}

// WriteTrace writes the trace as JSON lines.
func WriteTrace(w io.Writer, trace []TraceLine) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, l := range trace {
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("write trace: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}

// TraceOptions shape a trace built from pairs.
type TraceOptions struct {
	// Requests is the trace's length.
	Requests int
	// Clusters is how many paraphrase clusters are chosen (each brings its
	// distractors); 0 or more than there are: all of them.
	Clusters int
	// Seed fixes every random choice.
	Seed uint64
}

// unionFind groups questions labelled duplicate.
type unionFind struct{ parent []int }

func (u *unionFind) find(i int) int {
	for u.parent[i] != i {
		u.parent[i] = u.parent[u.parent[i]]
		i = u.parent[i]
	}
	return i
}

func (u *unionFind) union(a, b int) {
	if ra, rb := u.find(a), u.find(b); ra != rb {
		u.parent[max(ra, rb)] = min(ra, rb)
	}
}

// BuildTrace turns labelled pairs into a replay trace. Clusters are the
// connected components of the pairs labelled duplicate (union-find): one
// answer each. The chosen clusters are those with at least two wordings,
// in a seeded random order; each is followed in the popularity ranking by
// its distractors, the clusters of questions labelled not duplicate of one
// of its questions (look-alikes that mean something else). A request draws
// a rank by Zipf(1.0), P(rank k) ∝ 1/k, then a question of that cluster
// uniformly.
func BuildTrace(pairs []Pair, o TraceOptions) ([]TraceLine, error) {
	if o.Requests <= 0 {
		return nil, fmt.Errorf("build trace: requests must be > 0, got %d", o.Requests)
	}
	ids := map[string]int{}
	var texts []string
	id := func(s string) int {
		if i, ok := ids[s]; ok {
			return i
		}
		ids[s] = len(texts)
		texts = append(texts, s)
		return len(texts) - 1
	}
	type edge struct{ a, b int }
	var dups, nondups []edge
	for _, p := range pairs {
		a, b := id(p.A), id(p.B)
		if a == b {
			continue
		}
		if p.Duplicate {
			dups = append(dups, edge{a, b})
		} else {
			nondups = append(nondups, edge{a, b})
		}
	}
	u := &unionFind{parent: make([]int, len(texts))}
	for i := range u.parent {
		u.parent[i] = i
	}
	for _, e := range dups {
		u.union(e.a, e.b)
	}
	members := map[int][]int{}
	for i := range texts {
		r := u.find(i)
		members[r] = append(members[r], i)
	}
	distractors := map[int]map[int]bool{}
	for _, e := range nondups {
		ra, rb := u.find(e.a), u.find(e.b)
		if ra == rb {
			continue // labels disagree with the closure: not a distractor
		}
		for _, p := range [][2]int{{ra, rb}, {rb, ra}} {
			if distractors[p[0]] == nil {
				distractors[p[0]] = map[int]bool{}
			}
			distractors[p[0]][p[1]] = true
		}
	}
	var chosen []int
	for r, m := range members {
		if len(m) >= 2 {
			chosen = append(chosen, r)
		}
	}
	if len(chosen) == 0 {
		return nil, fmt.Errorf("build trace: no pair is labelled duplicate")
	}
	sort.Ints(chosen)
	rng := rand.New(rand.NewPCG(o.Seed, 0x7472616365))
	rng.Shuffle(len(chosen), func(i, j int) { chosen[i], chosen[j] = chosen[j], chosen[i] })
	if o.Clusters > 0 && o.Clusters < len(chosen) {
		chosen = chosen[:o.Clusters]
	}
	var ranking []int
	ranked := map[int]bool{}
	for _, c := range chosen {
		if ranked[c] {
			continue
		}
		ranked[c] = true
		ranking = append(ranking, c)
		var ds []int
		for d := range distractors[c] {
			if !ranked[d] {
				ds = append(ds, d)
			}
		}
		sort.Ints(ds)
		for _, d := range ds {
			ranked[d] = true
			ranking = append(ranking, d)
		}
	}
	// Zipf(1.0) over the ranking, by inverting the cumulative weights.
	cum := make([]float64, len(ranking))
	total := 0.0
	for k := range ranking {
		total += 1 / float64(k+1)
		cum[k] = total
	}
	out := make([]TraceLine, o.Requests)
	for i := range out {
		k := sort.SearchFloat64s(cum, rng.Float64()*total)
		k = min(k, len(ranking)-1)
		m := members[ranking[k]]
		q := m[rng.IntN(len(m))]
		out[i] = TraceLine{Question: texts[q], Answer: "a" + strconv.Itoa(ranking[k])}
	}
	return out, nil
}
