package cache

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Index writes of long prompts are bounded in bytes, not only in count: a
// queue of 1024 four-MiB prompts would otherwise hold 4 GiB.
func TestQueueBoundedInBytes(t *testing.T) {
	gate := make(chan struct{})
	vectors := map[string][]float32{}
	emb := &fakeEmbedder{Dim: testDim, EmbedFunc: func(ctx context.Context, texts []string) ([][]float32, error) {
		<-gate
		return vectorEmbedder(vectors).EmbedFunc(ctx, texts)
	}}
	const entry, budget, n = 256 << 10, 1 << 20, 20
	c := New(Options{Index: newMemIndex(), Embedder: emb, QueueSize: 1000, QueueBytes: budget})
	for i := range n {
		q := fmt.Sprintf("question %d", i)
		vectors[q] = vec(float64(i) / n)
		c.Store(t.Context(), chatKey(t, "A", "S", q), Entry{Body: []byte(strings.Repeat("a", entry))})
	}
	// Accepted: what fits the byte budget plus the batch the worker took.
	kept := n - int(c.Stats(t.Context()).QueueDrops)
	if max := budget/entry + budget/entry + 1; kept > max {
		t.Errorf("%d writes of %d KiB accepted with a %d KiB budget, want at most %d", kept, entry>>10, budget>>10, max)
	}
	if kept == 0 {
		t.Error("no write accepted")
	}
	if got := c.q.bytes.Load(); got > budget {
		t.Errorf("queued bytes = %d, want at most %d", got, budget)
	}
	close(gate)
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := c.q.bytes.Load(); got != 0 {
		t.Errorf("queued bytes after Close = %d, want 0", got)
	}
}
