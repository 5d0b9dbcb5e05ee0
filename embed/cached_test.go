package embed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeEmbedder is an Embedder whose behaviour the test supplies.
type fakeEmbedder struct {
	NameValue string
	Dim       int
	EmbedFunc func(ctx context.Context, texts []string) ([][]float32, error)
}

func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f.EmbedFunc(ctx, texts)
}
func (f *fakeEmbedder) Dimension() int { return f.Dim }
func (f *fakeEmbedder) Name() string   { return f.NameValue }

// fakeTruncator is a fakeEmbedder that also implements Truncator.
type fakeTruncator struct {
	*fakeEmbedder
	TruncatedFunc func(text string) bool
}

func (f *fakeTruncator) Truncated(text string) bool { return f.TruncatedFunc(text) }

// hashEmbedder is a fakeEmbedder answering with normalised fakeVector
// vectors and counting the texts it was asked for.
func hashEmbedder(dim int) (*fakeEmbedder, *atomic.Int64) {
	var texts atomic.Int64
	return &fakeEmbedder{NameValue: "fake", Dim: dim, EmbedFunc: func(ctx context.Context, in []string) ([][]float32, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		texts.Add(int64(len(in)))
		out := make([][]float32, len(in))
		for i, s := range in {
			out[i] = fakeVector(s, dim)
			if err := normalizeResponseVector(out[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}}, &texts
}

// newTestCached wraps e in a cache closed when the test ends.
func newTestCached(t testing.TB, e Embedder, maxBytes int64) *Cached {
	t.Helper()
	c, err := NewCached(e, maxBytes)
	if err != nil {
		t.Fatalf("NewCached: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func checkStats(t *testing.T, c *Cached, wantHits, wantMisses uint64) {
	t.Helper()
	hits, misses := c.Stats()
	if hits != wantHits || misses != wantMisses {
		t.Errorf("Stats() = %d hits, %d misses; want %d, %d", hits, misses, wantHits, wantMisses)
	}
}

func TestNewCachedErrors(t *testing.T) {
	inner, _ := hashEmbedder(4)
	tests := []struct {
		name     string
		e        Embedder
		maxBytes int64
	}{
		{name: "nil embedder", e: nil, maxBytes: 1 << 20},
		{name: "zero bytes", e: inner, maxBytes: 0},
		{name: "negative bytes", e: inner, maxBytes: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewCached(tt.e, tt.maxBytes); err == nil {
				t.Error("NewCached succeeded, want an error")
			}
		})
	}
}

func TestCachedSecondCallSkipsServer(t *testing.T) {
	f, srv := newFakeServer(t, &fakeEmbeddings{Dim: 8})
	c := newTestCached(t, newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"}), 1<<20)
	texts := []string{"alpha", "beta"}
	first := mustEmbed(t, c, texts)
	second := mustEmbed(t, c, texts)
	if got, want := f.calls.Load(), int64(1); got != want {
		t.Errorf("requests = %d, want %d", got, want)
	}
	for i := range texts {
		if d := vecMaxAbsDiff(first[i], second[i]); d != 0 {
			t.Errorf("vector %d differs between miss and hit by %g", i, d)
		}
		if d := vecMaxAbsDiff(second[i], wantVector(t, texts[i], 8)); d != 0 {
			t.Errorf("cached vector %d is not the vector of %q", i, texts[i])
		}
	}
	checkStats(t, c, 2, 2)
}

func TestCachedMixedBatchSendsOnlyMisses(t *testing.T) {
	f, srv := newFakeServer(t, &fakeEmbeddings{Dim: 8})
	c := newTestCached(t, newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"}), 1<<20)
	mustEmbed(t, c, []string{"a"})
	texts := []string{"a", "c", "a", "d", "c"}
	vecs := mustEmbed(t, c, texts)
	reqs := f.seen()
	if got, want := len(reqs), 2; got != want {
		t.Fatalf("requests = %d, want %d", got, want)
	}
	if got, want := strings.Join(reqs[1].Input, ","), "c,d"; got != want {
		t.Errorf("second request input = %q, want %q (misses only, once each)", got, want)
	}
	for i, text := range texts {
		if d := vecMaxAbsDiff(vecs[i], wantVector(t, text, 8)); d != 0 {
			t.Errorf("vector %d is not the vector of %q", i, text)
		}
	}
	checkStats(t, c, 2, 4) // a missed; then a, a hit and c, d, c missed
}

func TestCachedReturnsCopies(t *testing.T) {
	inner, _ := hashEmbedder(4)
	c := newTestCached(t, inner, 1<<20)
	for _, name := range []string{"miss", "hit"} {
		t.Run(name, func(t *testing.T) {
			vecs := mustEmbed(t, c, []string{"x", "y"})
			vecs[0][0] = 42
			vecs[0] = append(vecs[0], 7) // must not spill into vecs[1]
			if got, want := vecs[1][0], wantVector(t, "y", 4)[0]; got != want {
				t.Errorf("append to vector 0 changed vector 1: %v, want %v", got, want)
			}
			again := mustEmbed(t, c, []string{"x"})
			if d := vecMaxAbsDiff(again[0], wantVector(t, "x", 4)); d != 0 {
				t.Errorf("modifying a returned vector changed the cached one")
			}
		})
	}
}

func TestCachedByteBound(t *testing.T) {
	const dim, n = 64, 200
	inner, asked := hashEmbedder(dim)
	perEntry := cachedEntryCost(dim, len("text 000"))
	maxBytes := 20 * perEntry
	c := newTestCached(t, inner, maxBytes)
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("text %03d", i)
	}
	for i := 0; i < n; i += 10 {
		mustEmbed(t, c, texts[i:i+10])
		if used := c.cache.MaxCost() - c.cache.RemainingCost(); used > maxBytes {
			t.Fatalf("after %d texts: cost in use %d exceeds %d", i+10, used, maxBytes)
		}
	}
	used := c.cache.MaxCost() - c.cache.RemainingCost()
	if used <= 0 || used%perEntry != 0 {
		t.Errorf("cost in use = %d, want a positive multiple of the entry cost %d", used, perEntry)
	}
	if held := used / perEntry; held > 20 {
		t.Errorf("holds %d entries, bound allows 20", held)
	}
	// Embed everything again: at most the held entries can hit.
	before := asked.Load()
	mustEmbed(t, c, texts)
	if resent := asked.Load() - before; resent < n-20 {
		t.Errorf("re-embedding %d texts sent %d to the inner embedder, want at least %d (evictions)", n, resent, n-20)
	}
}

func TestCachedEntryCost(t *testing.T) {
	if got, want := cachedEntryCost(384, 100), int64(4*384+100+cachedEntryOverhead); got != want {
		t.Errorf("cachedEntryCost(384, 100) = %d, want %d", got, want)
	}
}

func TestCachedHashCollision(t *testing.T) {
	inner, asked := hashEmbedder(4)
	// Every text gets the same key and conflict hashes.
	c, err := newCached(inner, 1<<20, func(string) (uint64, uint64) { return 1, 2 })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	mustEmbed(t, c, []string{"first"})
	mustEmbed(t, c, []string{"second"}) // replaces "first" in the shared slot
	got := mustEmbed(t, c, []string{"first"})
	if d := vecMaxAbsDiff(got[0], wantVector(t, "first", 4)); d != 0 {
		t.Errorf("colliding text got another text's vector")
	}
	if got, want := asked.Load(), int64(3); got != want {
		t.Errorf("inner embedder asked for %d texts, want %d (collision is a miss)", got, want)
	}
}

func TestCachedInnerErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		embed   func(ctx context.Context, texts []string) ([][]float32, error)
		wantErr error
	}{
		{name: "error", embed: func(context.Context, []string) ([][]float32, error) { return nil, boom }, wantErr: boom},
		{name: "too few vectors", embed: func(context.Context, []string) ([][]float32, error) {
			return [][]float32{{1, 0}}, nil
		}},
		{name: "wrong dimension", embed: func(_ context.Context, texts []string) ([][]float32, error) {
			out := make([][]float32, len(texts))
			for i := range out {
				out[i] = []float32{1, 0, 0}
			}
			return out, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			inner := &fakeEmbedder{NameValue: "fake", Dim: 2, EmbedFunc: func(ctx context.Context, texts []string) ([][]float32, error) {
				calls.Add(1)
				return tt.embed(ctx, texts)
			}}
			c := newTestCached(t, inner, 1<<20)
			for range 2 {
				vecs, err := c.Embed(t.Context(), []string{"a", "b"})
				if err == nil || vecs != nil {
					t.Fatalf("Embed = %d vectors, %v; want an error", len(vecs), err)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("error = %v, want %v", err, tt.wantErr)
				}
			}
			if got, want := calls.Load(), int64(2); got != want {
				t.Errorf("inner calls = %d, want %d (failures are not cached)", got, want)
			}
		})
	}
}

func TestCachedTruncator(t *testing.T) {
	plain, _ := hashEmbedder(4)
	trunc := &fakeTruncator{fakeEmbedder: plain, TruncatedFunc: func(s string) bool { return len(s) > 5 }}
	tests := []struct {
		name  string
		inner Embedder
		text  string
		want  bool
	}{
		{name: "forwarded long", inner: trunc, text: "long text", want: true},
		{name: "forwarded short", inner: trunc, text: "abc", want: false},
		{name: "inner without truncation", inner: plain, text: strings.Repeat("x", 1<<16), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCached(t, tt.inner, 1<<20)
			if got := c.Truncated(tt.text); got != tt.want {
				t.Errorf("Truncated(%d bytes) = %v, want %v", len(tt.text), got, tt.want)
			}
		})
	}
}

func TestCachedForwardsIdentity(t *testing.T) {
	inner, _ := hashEmbedder(7)
	c := newTestCached(t, inner, 1<<20)
	if got, want := c.Name(), "fake"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	if got, want := c.Dimension(), 7; got != want {
		t.Errorf("Dimension() = %d, want %d", got, want)
	}
}

func TestCachedConcurrent(t *testing.T) {
	f, srv := newFakeServer(t, &fakeEmbeddings{Dim: 8})
	c := newTestCached(t, newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"}), 1<<20)
	texts := []string{"p", "q", "r", "s", "t"}
	want := make(map[string][]float32)
	for _, text := range texts {
		want[text] = wantVector(t, text, 8)
	}
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				batch := []string{texts[(w+r)%len(texts)], texts[(w+2*r)%len(texts)]}
				vecs, err := c.Embed(t.Context(), batch)
				if err != nil {
					errs <- err
					return
				}
				for i, text := range batch {
					if vecMaxAbsDiff(vecs[i], want[text]) != 0 {
						errs <- fmt.Errorf("worker %d round %d: wrong vector for %q", w, r, text)
						return
					}
					vecs[i][0] = -1 // callers may scribble on their copies
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	hits, misses := c.Stats()
	if got, want := hits+misses, uint64(workers*rounds*2); got != want {
		t.Errorf("hits+misses = %d, want %d", got, want)
	}
	// Concurrent first misses may each reach the server; later ones may not.
	if got := f.calls.Load(); got > workers*2 {
		t.Errorf("requests = %d for %d distinct texts", got, len(texts))
	}
}

func BenchmarkCachedHit(b *testing.B) {
	const dim = 384 // the built-in encoder's width
	inner, _ := hashEmbedder(dim)
	c := newTestCached(b, inner, 64<<20)
	texts := []string{"How do I reset my password on the mobile app?"}
	if _, err := c.Embed(b.Context(), texts); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Embed(b.Context(), texts); err != nil {
			b.Fatal(err)
		}
	}
	if _, misses := c.Stats(); misses != 1 {
		b.Fatalf("misses = %d, want 1", misses)
	}
}
