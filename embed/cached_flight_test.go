package embed

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedEmbedder answers after release is closed, counting calls and texts.
func gatedEmbedder(dim int) (*fakeEmbedder, chan struct{}, *atomic.Int64) {
	release := make(chan struct{})
	var calls atomic.Int64
	inner, _ := hashEmbedder(dim)
	return &fakeEmbedder{NameValue: "fake", Dim: dim, EmbedFunc: func(ctx context.Context, in []string) ([][]float32, error) {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return inner.Embed(ctx, in)
	}}, release, &calls
}

// waitUntil polls cond with a generous deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCachedConcurrentIdenticalTextsShareOneCall: callers asking for a text
// that is being embedded wait for that computation; the inner embedder sees
// the text once.
func TestCachedConcurrentIdenticalTextsShareOneCall(t *testing.T) {
	inner, release, calls := gatedEmbedder(8)
	c := newTestCached(t, inner, 1<<20)
	const callers = 8
	results := make([][][]float32, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	wg.Go(func() { results[0], errs[0] = c.Embed(t.Context(), []string{"same question"}) })
	waitUntil(t, "the first call to reach the inner embedder", func() bool { return calls.Load() == 1 })
	for i := 1; i < callers; i++ {
		wg.Go(func() { results[i], errs[i] = c.Embed(t.Context(), []string{"same question"}) })
	}
	waitUntil(t, "the other callers to wait", func() bool { return c.waiting.Load() == callers-1 })
	close(release)
	wg.Wait()
	want := wantVector(t, "same question", 8)
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if vecMaxAbsDiff(results[i][0], want) != 0 {
			t.Errorf("caller %d got another vector", i)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("inner calls = %d, want 1", got)
	}
	checkStats(t, c, callers-1, 1)
	results[1][0][0] = -1 // copies: scribbling on one leaves the others
	if results[2][0][0] == -1 {
		t.Error("callers share one vector slice")
	}
}

// TestCachedWaiterEmbedsWhenTheFirstCallFails: a waiter does not inherit
// the first caller's cancellation; it embeds the text itself.
func TestCachedWaiterEmbedsWhenTheFirstCallFails(t *testing.T) {
	inner, release, calls := gatedEmbedder(8)
	c := newTestCached(t, inner, 1<<20)
	ctx, cancel := context.WithCancel(t.Context())
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, firstErr = c.Embed(ctx, []string{"q"})
	}()
	waitUntil(t, "the first call to reach the inner embedder", func() bool { return calls.Load() == 1 })
	var got [][]float32
	var err error
	second := make(chan struct{})
	go func() {
		defer close(second)
		got, err = c.Embed(t.Context(), []string{"q"})
	}()
	waitUntil(t, "the second caller to wait", func() bool { return c.waiting.Load() == 1 })
	cancel()
	<-done
	if firstErr == nil {
		t.Fatal("the cancelled caller got no error")
	}
	close(release)
	<-second
	if err != nil {
		t.Fatalf("second caller: %v", err)
	}
	if vecMaxAbsDiff(got[0], wantVector(t, "q", 8)) != 0 {
		t.Error("second caller got another vector")
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("inner calls = %d, want 2 (the failed one and the retry)", n)
	}
}
