package cache

import "testing"

// TestFoldedQuery: the semantic tier embeds and stores the folded query,
// while the exact key stays on the request's bytes.
func TestFoldedQuery(t *testing.T) {
	c, idx, _ := semanticCache(t, nil)
	// "What is the capital of France？" (fullwidth question mark) folds to
	// qBase: a semantic hit on the stored entry, under its own exact key.
	k := chatKey(t, "A", "S", "What is the capital of France？")
	if k.Exact == chatKey(t, "A", "S", qBase).Exact {
		t.Fatal("the exact key was folded")
	}
	r, ok := c.Lookup(t.Context(), k, LookupOptions{})
	if !ok || r.Tier != TierSemantic || r.Similarity != 1 {
		t.Errorf("folded spelling = %q, %v (similarity %v); want a semantic hit at 1", r.Tier, ok, r.Similarity)
	}
	// A stored answer keeps the folded text as its query.
	c.Store(t.Context(), chatKey(t, "A", "S", "  what is the capital of Spain?\n"), Entry{Body: []byte("madrid")})
	waitIndexed(t, idx, 2)
	e, ok, err := idx.Get(t.Context(), chatKey(t, "A", "S", "  what is the capital of Spain?\n").Exact)
	if err != nil || !ok {
		t.Fatalf("the entry is not indexed under its raw exact key (%v)", err)
	}
	if e.Query != qFar {
		t.Errorf("stored query = %q, want the folded %q", e.Query, qFar)
	}
}

// TestInvisibleCharactersExactOnly: a query from which folding removes an
// invisible character a model may read gets exact hits only, and its
// answer is never indexed.
func TestInvisibleCharactersExactOnly(t *testing.T) {
	c, _, _ := semanticCache(t, nil)
	k := chatKey(t, "A", "S", "What is the capital of France?\u200b")
	if r, ok := c.Lookup(t.Context(), k, LookupOptions{}); ok {
		t.Errorf("a query with a zero-width space was served from the %s tier", r.Tier)
	}
	c.Store(t.Context(), k, Entry{Body: []byte("smuggled")})
	st := c.Stats(t.Context())
	if st.ExactOnly != 1 || st.QueueDepth != 0 || st.IndexEntries != 1 {
		t.Errorf("ExactOnly %d, queued %d, indexed %d; want 1, 0, 1", st.ExactOnly, st.QueueDepth, st.IndexEntries)
	}
	if r, ok := c.Lookup(t.Context(), k, LookupOptions{}); !ok || r.Tier != TierExact {
		t.Errorf("the same request again = %q, %v; want an exact hit", r.Tier, ok)
	}
}
