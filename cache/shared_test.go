package cache

import (
	"sync"
	"testing"
)

// sharedMemIndex is a memIndex that other processes flush too: the test
// plays the other process by deleting from the index and calling apply.
type sharedMemIndex struct {
	*memIndex
	mu    sync.Mutex
	apply func(partition string)
}

func (s *sharedMemIndex) WatchFlushes(apply func(partition string)) {
	s.mu.Lock()
	s.apply = apply
	s.mu.Unlock()
}

// TestSharedIndexFlush: a flush another process made through a shared index
// drops that partition, and only it, from this cache's exact tier.
func TestSharedIndexFlush(t *testing.T) {
	idx := &sharedMemIndex{memIndex: newMemIndex()}
	c := newCache(t, Options{Index: idx, Embedder: vectorEmbedder(standardVectors()), Threshold: 0.9})
	for _, p := range []string{"A", "B"} {
		c.Store(t.Context(), chatKey(t, p, "S", qBase), Entry{Model: "m", Body: []byte("paris " + p)})
	}
	waitIndexed(t, idx, 2)
	idx.mu.Lock()
	apply := idx.apply
	idx.mu.Unlock()
	if apply == nil {
		t.Fatal("the cache did not watch the shared index's flushes")
	}
	// The other process deletes partition A from the shared index and
	// records the flush; this process reads the record.
	if err := idx.DeletePartition(t.Context(), "A"); err != nil {
		t.Fatal(err)
	}
	apply("A")
	if r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qBase), LookupOptions{}); ok {
		t.Errorf("partition A after the other process's flush: served %q from the %s tier, want a miss", r.Entry.Body, r.Tier)
	}
	if r, ok := c.Lookup(t.Context(), chatKey(t, "B", "S", qBase), LookupOptions{}); !ok || string(r.Entry.Body) != "paris B" {
		t.Errorf("partition B after A's flush: %q, %v; want its own answer", r.Entry.Body, ok)
	}
	apply("")
	if _, ok := c.exact.Get(chatKey(t, "B", "S", qBase).Exact, c.now()); ok {
		t.Error("the exact tier still serves B after another process flushed everything")
	}
}
