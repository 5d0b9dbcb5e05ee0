package cache

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// waitState polls Stats until the index is in state want.
func waitState(t *testing.T, c *Cache, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.Stats(t.Context()).IndexState
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("index state = %q after 10s, want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gatedOpen is an OpenIndex that blocks until release is closed (or its
// context ends, when honourCancel), then returns ix.
type gatedOpen struct {
	ix           Index
	started      chan struct{}
	release      chan struct{}
	honourCancel bool
}

func newGatedOpen(ix Index) *gatedOpen {
	return &gatedOpen{ix: ix, started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedOpen) open(ctx context.Context) (Index, error) {
	close(g.started)
	if g.honourCancel {
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		<-g.release
	}
	return g.ix, nil
}

// closeCounter counts Close calls on an index.
type closeCounter struct {
	Index
	closes atomic.Int64
}

func (c *closeCounter) Close() error { c.closes.Add(1); return c.Index.Close() }

// TestOpenIndexInBackground: while the index opens the cache serves the
// exact tier, misses semantically without writing to the index, reports the
// index as opening, and holds flushes for the index; once open, the stored
// entries answer paraphrases, except the flushed partition's.
func TestOpenIndexInBackground(t *testing.T) {
	idx := newMemIndex()
	// The "snapshot": an answer to qBase in partitions A and B.
	for _, p := range []string{"A", "B"} {
		k := chatKey(t, p, "S", qBase)
		e := Entry{Key: k.Exact, Partition: p, Fingerprint: k.Fingerprint, Query: qBase, Model: "m", Body: []byte("paris " + p), Created: time.Now()}
		if err := idx.Upsert(t.Context(), []IndexItem{{Entry: e, Vector: vec(1)}}); err != nil {
			t.Fatal(err)
		}
	}
	g := newGatedOpen(idx)
	c := newCache(t, Options{OpenIndex: g.open, Embedder: vectorEmbedder(standardVectors()), Threshold: 0.9})
	<-g.started

	if r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{}); ok {
		t.Fatalf("paraphrase while opening = %q hit, want a miss", r.Tier)
	}
	if err := c.Health()[ComponentIndex]; !errors.Is(err, ErrIndexOpening) {
		t.Errorf("Health[index] while opening = %v, want ErrIndexOpening", err)
	}
	if s := c.Stats(t.Context()); s.IndexState != IndexOpening || s.IndexEntries != -1 {
		t.Errorf("Stats while opening: state %q, index entries %d; want %q, -1", s.IndexState, s.IndexEntries, IndexOpening)
	}
	kOther := chatKey(t, "A", "S", qOther)
	c.Store(t.Context(), kOther, Entry{Model: "m", Body: []byte("bread")})
	if r, ok := c.Lookup(t.Context(), kOther, LookupOptions{}); !ok || r.Tier != TierExact {
		t.Errorf("repeat while opening = %q %v, want an exact hit", r.Tier, ok)
	}
	if s := c.Stats(t.Context()); s.OpeningSkips != 1 || s.QueueDepth != 0 {
		t.Errorf("Stats after a store while opening: opening_skips %d, queue %d; want 1, 0", s.OpeningSkips, s.QueueDepth)
	}
	if err := c.Flush(t.Context(), "B"); err != nil {
		t.Fatalf("flush while opening: %v", err)
	}

	close(g.release)
	waitState(t, c, IndexReady)
	if err := c.Health()[ComponentIndex]; err != nil {
		t.Errorf("Health[index] once open = %v, want healthy", err)
	}
	r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{})
	if !ok || r.Tier != TierSemantic || string(r.Entry.Body) != "paris A" {
		t.Errorf("paraphrase once open = %q %v %q, want a semantic hit on \"paris A\"", r.Tier, ok, r.Entry.Body)
	}
	if r, ok := c.Lookup(t.Context(), chatKey(t, "B", "S", qPara), LookupOptions{}); ok {
		t.Errorf("paraphrase in B once open = %q hit %q, want a miss: B was flushed while the index opened", r.Tier, r.Entry.Body)
	}
	if n, _ := idx.Len(t.Context()); n != 1 {
		t.Errorf("index holds %d entries, want 1 (A's; B flushed, nothing written while opening)", n)
	}
	if s := c.Stats(t.Context()); s.IndexOpenSeconds <= 0 {
		t.Errorf("IndexOpenSeconds = %v once open, want the open's duration", s.IndexOpenSeconds)
	}
}

// TestOpenIndexManyFlushesWhileOpening: past maxPendingFlushes partitions the
// pending flushes become one flush of everything, never a lost flush.
func TestOpenIndexManyFlushesWhileOpening(t *testing.T) {
	idx := newMemIndex()
	k := chatKey(t, "keep?", "S", qBase)
	e := Entry{Key: k.Exact, Partition: "keep?", Fingerprint: k.Fingerprint, Query: qBase, Body: []byte("x"), Created: time.Now()}
	if err := idx.Upsert(t.Context(), []IndexItem{{Entry: e, Vector: vec(1)}}); err != nil {
		t.Fatal(err)
	}
	g := newGatedOpen(idx)
	c := newCache(t, Options{OpenIndex: g.open, Embedder: vectorEmbedder(standardVectors())})
	<-g.started
	for i := range maxPendingFlushes + 1 {
		if err := c.Flush(t.Context(), strings.Repeat("p", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	close(g.release)
	waitState(t, c, IndexReady)
	if n, _ := idx.Len(t.Context()); n != 0 {
		t.Errorf("index holds %d entries after %d flushes while opening, want 0 (collapsed to a flush of all)", n, maxPendingFlushes+1)
	}
}

// TestOpenIndexFailureLeavesTierOff: a failed open is reported with its
// cause, and the cache keeps serving the exact tier.
func TestOpenIndexFailureLeavesTierOff(t *testing.T) {
	c := newCache(t, Options{
		OpenIndex: func(context.Context) (Index, error) {
			return nil, errors.New("lock /data/index.lock: held by another process")
		},
		Embedder: vectorEmbedder(standardVectors()),
	})
	waitState(t, c, IndexFailed)
	err := c.Health()[ComponentIndex]
	if err == nil || errors.Is(err, ErrIndexOpening) || !strings.Contains(err.Error(), "held by another process") {
		t.Errorf("Health[index] after a failed open = %v, want the cause", err)
	}
	k := chatKey(t, "A", "S", qBase)
	c.Store(t.Context(), k, Entry{Model: "m", Body: []byte("paris")})
	if r, ok := c.Lookup(t.Context(), k, LookupOptions{}); !ok || r.Tier != TierExact {
		t.Errorf("repeat after a failed open = %q %v, want an exact hit", r.Tier, ok)
	}
	if s := c.Stats(t.Context()); s.OpeningSkips != 0 || s.QueueDepth != 0 {
		t.Errorf("store after a failed open: opening_skips %d, queue %d; want 0, 0 (nothing is opening)", s.OpeningSkips, s.QueueDepth)
	}
	c.Recheck(t.Context())
	if c.Health()[ComponentIndex] == nil {
		t.Error("Recheck cleared a failed open: the tier is still off")
	}
}

// TestCloseWhileIndexOpening: Close stops an open that honours its context,
// and closes an index whose open outlives Close's context once it returns.
func TestCloseWhileIndexOpening(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		g := newGatedOpen(newMemIndex())
		g.honourCancel = true
		c := New(Options{OpenIndex: g.open, Embedder: vectorEmbedder(standardVectors())})
		<-g.started
		if err := c.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := c.Stats(t.Context()); s.IndexState != IndexFailed {
			t.Errorf("state after Close = %q, want %q", s.IndexState, IndexFailed)
		}
	})
	t.Run("outlives close", func(t *testing.T) {
		ix := &closeCounter{Index: newMemIndex()}
		g := newGatedOpen(ix)
		c := New(Options{OpenIndex: g.open, Embedder: vectorEmbedder(standardVectors())})
		<-g.started
		ctx, cancel := context.WithCancel(t.Context())
		cancel()         // Close does not wait for the open
		_ = c.Close(ctx) // reports the cancelled flush of the (empty) write queue
		close(g.release)
		waitState(t, c, IndexFailed)
		if n := ix.closes.Load(); n != 1 {
			t.Errorf("index closed %d times after an open that outlived Close, want 1", n)
		}
	})
	t.Run("opened", func(t *testing.T) {
		ix := &closeCounter{Index: newMemIndex()}
		g := newGatedOpen(ix)
		close(g.release)
		c := New(Options{OpenIndex: g.open, Embedder: vectorEmbedder(standardVectors())})
		waitState(t, c, IndexReady)
		if err := c.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := ix.closes.Load(); n != 1 {
			t.Errorf("opened index closed %d times by Close, want 1", n)
		}
	})
}
