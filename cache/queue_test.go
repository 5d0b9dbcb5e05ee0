package cache

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestStoreNeverBlocks(t *testing.T) {
	gate := make(chan struct{})
	vectors := map[string][]float32{}
	emb := &fakeEmbedder{Dim: testDim, EmbedFunc: func(ctx context.Context, texts []string) ([][]float32, error) {
		<-gate
		return vectorEmbedder(vectors).EmbedFunc(ctx, texts)
	}}
	idx := newMemIndex()
	c := New(Options{Index: idx, Embedder: emb, QueueSize: 2})
	const n = 20
	start := time.Now()
	for i := range n {
		q := fmt.Sprintf("question %d", i)
		vectors[q] = vec(float64(i) / n)
		c.Store(t.Context(), chatKey(t, "A", "S", q), Entry{Body: []byte("a")})
	}
	// A blocking Store would wait for the gate forever.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("%d Stores with a stuck embedder took %v", n, d)
	}
	// Accepted: at most QueueSize waiting plus the batch the worker took
	// (its first item and what was queued then).
	if got, want := c.Stats(t.Context()).QueueDrops, uint64(n-(2*2+1)); got < want {
		t.Errorf("QueueDrops = %d, want at least %d", got, want)
	}
	close(gate)
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestCloseFlushesPendingWrites(t *testing.T) {
	vectors := map[string][]float32{}
	slow := &fakeEmbedder{Dim: testDim, EmbedFunc: func(ctx context.Context, texts []string) ([][]float32, error) {
		time.Sleep(20 * time.Millisecond)
		return vectorEmbedder(vectors).EmbedFunc(ctx, texts)
	}}
	idx := newMemIndex()
	c := New(Options{Index: idx, Embedder: slow, QueueSize: 100})
	const n = 10
	for i := range n {
		q := fmt.Sprintf("q%d", i)
		vectors[q] = vec(float64(i) / n)
	}
	for i := range n {
		c.Store(t.Context(), chatKey(t, "A", "S", fmt.Sprintf("q%d", i)), Entry{Body: []byte("a")})
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := idx.Len(t.Context()); got != n {
		t.Errorf("index holds %d entries after Close, want %d", got, n)
	}
	if err := c.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// Stores after Close are dropped, not panics.
	c.Store(t.Context(), chatKey(t, "A", "S", "q0"), Entry{Body: []byte("a")})
}

func TestCloseBounded(t *testing.T) {
	emb := &fakeEmbedder{Dim: testDim, EmbedFunc: func(ctx context.Context, texts []string) ([][]float32, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	c := New(Options{Index: newMemIndex(), Embedder: emb})
	c.Store(t.Context(), chatKey(t, "A", "S", "q"), Entry{Body: []byte("a")})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want a deadline error", err)
	}
	// Unbounded, Close would wait for the embedder forever.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with a 50ms context", d)
	}
}

func TestFlushDropsQueuedWrites(t *testing.T) {
	gate := make(chan struct{})
	good := vectorEmbedder(standardVectors())
	emb := &fakeEmbedder{Dim: testDim, EmbedFunc: func(ctx context.Context, texts []string) ([][]float32, error) {
		<-gate
		return good.EmbedFunc(ctx, texts)
	}}
	idx := newMemIndex()
	c := New(Options{Index: idx, Embedder: emb})
	c.Store(t.Context(), chatKey(t, "A", "S", qBase), Entry{Body: []byte("paris")})
	if err := c.Flush(t.Context(), "A"); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := idx.Len(t.Context()); got != 0 {
		t.Errorf("index holds %d entries; a write queued before the flush came back", got)
	}
}
