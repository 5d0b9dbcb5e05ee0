package evalcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/embed"
)

// Pair is one labelled line of a pairs file: b is cached, a is asked, and
// duplicate says whether b's answer is a correct answer to a.
type Pair struct {
	A         string `json:"a"`
	B         string `json:"b"`
	Duplicate bool   `json:"duplicate"`
}

// Outcome is what the semantic tier did with one pair.
type Outcome struct {
	// Score is the cosine similarity the index returned for a against b
	// (Search with Threshold 0, Limit 1 in the pair's own partition).
	Score float32
	// GuardOK and Reason are the guard's verdict on (a, b).
	GuardOK bool
	Reason  string
	// Duplicate is the pair's label.
	Duplicate bool
}

// GuardFunc is the guard's signature, as the cache takes it.
type GuardFunc func(query, candidate string) (ok bool, reason string)

// ReadPairs reads JSON lines of {"a","b","duplicate"}. Blank lines are
// skipped; a line that does not parse is an error naming its number.
func ReadPairs(r io.Reader) ([]Pair, error) {
	return readLines(r, "read pairs", func(Pair) error { return nil })
}

// readLines reads JSON lines of T, skipping blank lines: a line that does
// not parse, or that check refuses, is an error naming its number after
// what (the reading's name, which starts every error).
func readLines[T any](r io.Reader, what string, check func(T) error) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		b := sc.Bytes()
		if strings.TrimSpace(string(b)) == "" {
			continue
		}
		var v T
		err := json.Unmarshal(b, &v)
		if err == nil {
			err = check(v)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", what, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Sample returns n pairs drawn without replacement by a generator seeded
// with seed, in file order; n <= 0 or n >= len(pairs) returns pairs.
func Sample(pairs []Pair, n int, seed uint64) []Pair {
	if n <= 0 || n >= len(pairs) {
		return pairs
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	idx := rng.Perm(len(pairs))[:n]
	keep := make([]bool, len(pairs))
	for _, i := range idx {
		keep[i] = true
	}
	out := make([]Pair, 0, n)
	for i, p := range pairs {
		if keep[i] {
			out = append(out, p)
		}
	}
	return out
}

// Progress is told how much of the work is done; nil means silent.
type Progress func(stage string, done, total int)

// ReasonUnseen is the Outcome reason of a pair the semantic tier does not
// compare by vectors: a text it cannot see in full (cache.Seen) or one much
// longer than the other (cache.Comparable). Such a pair is never a hit in
// the guarded table, as in the cache.
const ReasonUnseen = "unseen"

// Measure runs every pair through the semantic tier: it embeds each unique
// text once (in batches) in the form the cache embeds it (cache.SemanticText),
// stores b under the pair's own partition, searches that partition with a's
// vector, applies the cache's coverage and length rules (ReasonUnseen) and
// asks the guard about (a, b). Pairs with a text the embedder refuses (such
// as "") are left out; skipped counts them.
func Measure(ctx context.Context, pairs []Pair, emb embed.Embedder, idx cache.Index, guard GuardFunc, progress Progress) (out []Outcome, skipped int, err error) {
	if progress == nil {
		progress = func(string, int, int) {}
	}
	vecs, err := embedAll(ctx, pairs, emb, progress)
	if err != nil {
		return nil, 0, err
	}
	const fingerprint = "eval"
	var batch []cache.IndexItem
	kept := make([]int, 0, len(pairs))
	for i, p := range pairs {
		va, vb := vecs[p.A], vecs[p.B]
		if va == nil || vb == nil {
			skipped++
			continue
		}
		kept = append(kept, i)
		key := strconv.Itoa(i)
		batch = append(batch, cache.IndexItem{
			Entry:  cache.Entry{Key: key, Partition: "pair-" + key, Fingerprint: fingerprint, Query: folded(p.B)},
			Vector: vb,
		})
		if len(batch) == 512 {
			if err := idx.Upsert(ctx, batch); err != nil {
				return nil, 0, fmt.Errorf("upsert pairs: %w", err)
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if err := idx.Upsert(ctx, batch); err != nil {
			return nil, 0, fmt.Errorf("upsert pairs: %w", err)
		}
	}
	out = make([]Outcome, 0, len(kept))
	for n, i := range kept {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		p := pairs[i]
		key := strconv.Itoa(i)
		ms, err := idx.Search(ctx, cache.SearchQuery{
			Partition: "pair-" + key, Fingerprint: fingerprint, Vector: vecs[p.A], Threshold: 0, Limit: 1,
		})
		if err != nil {
			return nil, 0, fmt.Errorf("search pair %d: %w", i, err)
		}
		o := Outcome{Duplicate: p.Duplicate, GuardOK: true}
		if len(ms) > 0 {
			o.Score = ms[0].Score
			qa, seenA := cache.Seen(emb, p.A)
			qb, seenB := cache.Seen(emb, p.B)
			switch {
			case !seenA || !seenB || !cache.Comparable(qa, qb):
				o.GuardOK, o.Reason = false, ReasonUnseen
			case guard != nil:
				o.GuardOK, o.Reason = guard(qa, ms[0].Entry.Query)
			}
		}
		out = append(out, o)
		if n%256 == 0 || n == len(kept)-1 {
			progress("search", n+1, len(kept))
		}
	}
	return out, skipped, nil
}

// folded is the text the cache embeds for a query.
func folded(q string) string {
	t, _ := cache.SemanticText(q)
	return t
}

// embedAll embeds every unique non-empty text of pairs, 64 at a time. A text
// the embedder refuses as invalid is left out of the map; any other error
// stops the run.
func embedAll(ctx context.Context, pairs []Pair, emb embed.Embedder, progress Progress) (map[string][]float32, error) {
	seen := make(map[string][]float32, 2*len(pairs))
	var texts []string
	for _, p := range pairs {
		for _, t := range [2]string{p.A, p.B} {
			if _, ok := seen[t]; ok || t == "" {
				continue
			}
			seen[t] = nil
			texts = append(texts, t)
		}
	}
	const batchSize = 64
	progress("embed", 0, len(texts))
	for start := 0; start < len(texts); start += batchSize {
		raw := texts[start:min(start+batchSize, len(texts))]
		batch := make([]string, len(raw))
		for k, t := range raw {
			batch[k] = folded(t)
		}
		vecs, err := emb.Embed(ctx, batch)
		if errors.Is(err, embed.ErrInvalidText) {
			// Find the bad text(s) one by one; the rest still count.
			vecs = make([][]float32, len(batch))
			for k, t := range batch {
				v, err := emb.Embed(ctx, []string{t})
				if errors.Is(err, embed.ErrInvalidText) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("embed texts: %w", err)
				}
				vecs[k] = v[0]
			}
		} else if err != nil {
			return nil, fmt.Errorf("embed texts: %w", err)
		}
		for k, t := range raw {
			seen[t] = vecs[k]
		}
		progress("embed", start+len(batch), len(texts))
	}
	return seen, nil
}
