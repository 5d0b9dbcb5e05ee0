package embed

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Token ids below firstPiece are reserved (unknown, <s>, </s>, extra ids) and
// never produced by the lattice except unknownID.
const (
	unknownID  = 0
	firstPiece = 6
	wordBreak  = '▁' // U+2581, SentencePiece's word-boundary marker
)

// tokenizer is a port of the tfjs-models Universal Sentence Encoder
// tokenizer (a SentencePiece-unigram Viterbi over a trie of the pieces). It
// reproduces that runtime's quirks on purpose, because the weights were
// trained against ids produced this way:
//   - a position's best score of exactly 0 counts as "unset" and is replaced
//     by any candidate; ties go to the later candidate (>=);
//   - a character with no trie edge becomes one unknown id with score 0, and
//     JavaScript measures that character in UTF-16 units when it looks up the
//     score before it, so a non-BMP unknown reads the score two code points
//     back;
//   - runs of unknown ids are merged into one.
type tokenizer struct {
	edges map[uint64]int32 // parent node<<32 | rune → child node
	ids   []int32          // per node: piece id, or -1 if no piece ends here
	score []float32        // per node: piece score (JSON null → 0)
}

func newTokenizer(pieces []string, scores []float32) *tokenizer {
	t := &tokenizer{edges: make(map[uint64]int32, 32768), ids: []int32{-1}, score: []float32{0}}
	for id := firstPiece; id < len(pieces); id++ {
		node := int32(0)
		for _, r := range pieces[id] {
			key := uint64(node)<<32 | uint64(uint32(r))
			child, ok := t.edges[key]
			if !ok {
				child = int32(len(t.ids))
				t.ids = append(t.ids, -1)
				t.score = append(t.score, 0)
				t.edges[key] = child
			}
			node = child
		}
		t.ids[node] = int32(id)
		t.score[node] = scores[id]
	}
	return t
}

// tokScratch holds the per-call lattice buffers so that steady-state
// tokenisation does not allocate beyond the normalised string.
type tokScratch struct {
	runes []rune
	best  []float32
	word  []int32
	from  []int32
	out   []int32
}

// encode appends the ids of text to s.out[:0] and returns them. It returns an
// empty slice for text that normalises to "" (the runtime adds no ▁ then).
func (t *tokenizer) encode(text string, s *tokScratch) []int32 {
	text = norm.NFKC.String(text)
	s.out = s.out[:0]
	if text == "" {
		return s.out
	}
	runes := append(s.runes[:0], wordBreak)
	for _, r := range text {
		if r == ' ' {
			r = wordBreak
		}
		runes = append(runes, r)
	}
	s.runes = runes
	n := len(runes)
	best := grow(s.best, n+1)
	word := growInt32(s.word, n+1)
	from := growInt32(s.from, n+1)
	s.best, s.word, s.from = best, word, from
	for i := range best {
		best[i], word[i], from[i] = 0, -1, -1
	}
	relax := func(start, end int, id int32, score float32) {
		total := score + best[start]
		if best[end] == 0 || total >= best[end] {
			best[end], word[end], from[end] = total, id, int32(start)
		}
	}
	for start := 0; start < n; start++ {
		node, ok := t.edges[uint64(uint32(runes[start]))]
		if !ok {
			// JS: best[end - key.length] with key a UTF-16 string.
			base := start + 1 - utf16Len(runes[start])
			total := best[base]
			end := start + 1
			if best[end] == 0 || total >= best[end] {
				best[end], word[end], from[end] = total, unknownID, int32(start)
			}
			continue
		}
		for end := start + 1; ; end++ {
			if id := t.ids[node]; id >= 0 {
				relax(start, end, id, t.score[node])
			}
			if end == n {
				break
			}
			node, ok = t.edges[uint64(node)<<32|uint64(uint32(runes[end]))]
			if !ok {
				break
			}
		}
	}
	// Walk back; a position no piece reaches (a trie prefix with no piece
	// of length one) is taken as one unknown character.
	out := s.out
	prevUnk := false
	for end := n; end > 0; {
		id, start := word[end], int(from[end])
		if id < 0 {
			id, start = unknownID, end-1
		}
		if !(prevUnk && id == unknownID) {
			out = append(out, id)
		}
		prevUnk = id == unknownID
		end = start
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	s.out = out
	return out
}

func utf16Len(r rune) int {
	if r >= 0x10000 && r <= utf8.MaxRune {
		return 2
	}
	return 1
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func growInt32(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}
