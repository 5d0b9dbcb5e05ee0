package cache

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestWriteBackReusesLookupVector checks a semantic miss embeds its question
// once: the lookup's vector, carried by its miss handle (Result.Miss), is
// what the write-back stores, with no second call to the embedder; a Store
// without a lookup embeds the question in the write-back as before.
func TestWriteBackReusesLookupVector(t *testing.T) {
	emb := vectorEmbedder(standardVectors())
	idx := newMemIndex()
	c := newCache(t, Options{Index: idx, Embedder: emb, Threshold: 0.9})

	key := chatKey(t, "A", "S", qOther)
	res, ok := c.Lookup(t.Context(), key, LookupOptions{})
	if ok {
		t.Fatal("lookup in an empty cache hit")
	}
	if !slices.Equal(res.Miss.vec, vec(0.10)) {
		t.Fatalf("miss handle's vector = %v, want the query's embedding %v", res.Miss.vec, vec(0.10))
	}
	before := emb.calls.Load()
	res.Miss.Store(t.Context(), key, Entry{Model: "m", Body: []byte("bread")})
	waitIndexed(t, idx, 1)
	if got := emb.calls.Load() - before; got != 0 {
		t.Errorf("write-back with the lookup's vector called the embedder %d times, want 0", got)
	}

	plain := chatKey(t, "A", "S", qBase)
	c.Store(t.Context(), plain, Entry{Model: "m", Body: []byte("paris")})
	waitIndexed(t, idx, 2)
	if got := emb.calls.Load() - before; got != 1 {
		t.Errorf("write-back without a vector called the embedder %d times, want 1", got)
	}
	// Both are searchable under their own vectors.
	for q, want := range map[string]string{qOther: "bread", qPara: "paris"} {
		r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", q), LookupOptions{})
		if !ok || string(r.Entry.Body) != want {
			t.Errorf("lookup %q = %q (hit %v), want %q", q, r.Entry.Body, ok, want)
		}
	}
}

// TestWriteBackKeepsVectoredItemsWhenEmbedderFails: in a batch where the
// embedder fails for the items that need it, the items that came with the
// lookup's vector are still written.
func TestWriteBackKeepsVectoredItemsWhenEmbedderFails(t *testing.T) {
	emb := vectorEmbedder(standardVectors())
	idx := newMemIndex()
	c := newCache(t, Options{Index: idx, Embedder: emb, Threshold: 0.9})
	base := emb.EmbedFunc
	emb.EmbedFunc = func(ctx context.Context, texts []string) ([][]float32, error) {
		if slices.Contains(texts, qBase) {
			return nil, errors.New("embedder down")
		}
		return base(ctx, texts)
	}
	live := []queueItem{
		{e: Entry{Key: "k1", Partition: "A", Fingerprint: "f", Query: qBase, Body: []byte("x")}},
		{e: Entry{Key: "k2", Partition: "A", Fingerprint: "f", Query: qOther, Body: []byte("y")}, vec: vec(0.10)},
	}
	c.writeBatch(t.Context(), live)
	if n, _ := idx.Len(t.Context()); n != 1 {
		t.Fatalf("index holds %d entries after a partly failed batch, want 1 (the one with its vector)", n)
	}
	if got := c.Stats(t.Context()).WriteFailures; got != 1 {
		t.Errorf("write failures = %d, want 1", got)
	}
}
