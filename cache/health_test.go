package cache

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestIndexWriteFailuresDegrade is finding 9 of the hardening audit: with a
// full disk, /readyz said ready while every index write failed, because a
// successful search (or Recheck's Len) cleared the index's failure. Write
// failures now have their own component that only a successful upsert
// clears, and a counter.
func TestIndexWriteFailuresDegrade(t *testing.T) {
	var idx *fakeIndex
	var full atomic.Bool
	c, mem, _ := semanticCache(t, func(o *Options) {
		idx = &fakeIndex{memIndex: o.Index.(*memIndex)}
		idx.UpsertFunc = func(ctx context.Context, items []IndexItem) error {
			if full.Load() {
				return errors.New("write wal: no space left on device")
			}
			return idx.memIndex.Upsert(ctx, items)
		}
		o.Index = idx
	})
	full.Store(true)
	c.Store(t.Context(), chatKey(t, "A", "S", qOther), Entry{Model: "m", Body: []byte("bread")})
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats(t.Context()).IndexWriteErrors == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the failed upsert was not counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Reads keep working: a semantic hit and Recheck's Len succeed.
	if r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{}); !ok || r.Tier != TierSemantic {
		t.Fatalf("semantic lookup with failing writes = %q %v, want a semantic hit", r.Tier, ok)
	}
	c.Recheck(t.Context())
	err := c.Health()[ComponentIndexWrites]
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Health()[%s] = %v after a successful read and a recheck, want the write failure named", ComponentIndexWrites, err)
	}
	if st := c.Stats(t.Context()); st.WriteFailures != 1 || st.IndexWriteErrors < 1 {
		t.Errorf("WriteFailures = %d, IndexWriteErrors = %d; want 1 and at least 1", st.WriteFailures, st.IndexWriteErrors)
	}

	// Space is back: the next readiness recheck writes the failed batch
	// again, clears the failure and the entry is not lost.
	full.Store(false)
	c.Recheck(t.Context())
	if h := c.Health(); len(h) != 0 {
		t.Errorf("Health() = %v after writes recovered, want empty", h)
	}
	if n, _ := mem.Len(t.Context()); n != 2 {
		t.Errorf("index holds %d entries after recovery, want 2 (the failed batch rewritten)", n)
	}
}
