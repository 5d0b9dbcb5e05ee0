package cache

import (
	"strings"

	"github.com/breakwater-dev/breakwater/lib/textnorm"
)

// SemanticText returns the text the semantic tier embeds, guards and stores
// for a request's query: the query folded by textnorm.Semantic (NFKC, every
// decimal digit in ASCII, confusable punctuation in ASCII, white space
// collapsed, a few emoji dropped). ok is false when folding removed
// something a model may read (invisible format characters, many emoji,
// invalid UTF-8): such a query gets exact hits only.
//
// The exact key is not folded: it stays on the request's bytes, which is
// strictly more specific (two spellings the folding joins are two exact
// entries, and one semantic neighbour of each other).
func SemanticText(query string) (text string, ok bool) {
	return textnorm.Semantic(query)
}

// Length rule: a candidate whose text has more than
// maxLengthRatio × the query's words + lengthSlack (or the other way round)
// is not compared by vectors. A sentence vector is an average: a text padded
// with the other's words, repeats or filler keeps its cosine while carrying
// more (issue 42, "dilution"). The slack lets a short question gain "please",
// "thank you so much" or a greeting.
const (
	maxLengthRatio = 2
	lengthSlack    = 3
)

// Comparable reports whether two semantic texts are close enough in length
// (in words) for their vectors to be compared: the longer has at most twice
// the words of the shorter, plus three.
func Comparable(a, b string) bool {
	na, nb := words(a), words(b)
	return max(na, nb) <= maxLengthRatio*min(na, nb)+lengthSlack
}

// words counts the space-separated words of a folded text.
func words(s string) int {
	return len(strings.Fields(s))
}

// MaxSemanticBytes bounds the folded text a semantic lookup or entry may
// have, whatever the embedder: longer prompts get exact hits only. It is
// above what the built-in encoder sees (128 tokens) and what
// embed.OpenAICoverBytes lets through, so the embedder's own coverage decides
// first; it bounds an embedder that reports none.
const MaxSemanticBytes = 2048

// Seen returns SemanticText(query) and whether a semantic tier embedding
// with e may use it: nothing a model reads was removed, it is at most
// MaxSemanticBytes, and e represents all of it (no unknown token, no
// truncation: embed.Coverer, or embed.Truncator for an embedder that only
// reports truncation; an embedder that reports neither is taken at its
// word). A text that is not seen gets exact hits only: it is never stored as
// a semantic candidate and never matched as one.
func Seen(e Embedder, query string) (string, bool) {
	return seenWith(coverFunc(e), query)
}

// coverFunc is e's coverage report, nil when it has none.
func coverFunc(e Embedder) func(text string) bool {
	switch e := e.(type) {
	case coverer:
		return e.Covers
	case truncator:
		return func(text string) bool { return !e.Truncated(text) }
	}
	return nil
}

func seenWith(cover func(string) bool, query string) (string, bool) {
	text, ok := SemanticText(query)
	if !ok || text == "" || len(text) > MaxSemanticBytes {
		return text, false
	}
	if cover != nil && !cover(text) {
		return text, false
	}
	return text, true
}

// seen is Seen with the cache's embedder.
func (c *Cache) seen(query string) (string, bool) {
	return seenWith(c.cover, query)
}
