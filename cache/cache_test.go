package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeEmbedder is an Embedder whose behaviour the test sets.
type fakeEmbedder struct {
	EmbedFunc func(ctx context.Context, texts []string) ([][]float32, error)
	Dim       int
	calls     atomic.Int64
}

func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.calls.Add(1)
	return f.EmbedFunc(ctx, texts)
}
func (f *fakeEmbedder) Dimension() int { return f.Dim }
func (f *fakeEmbedder) Name() string   { return "fake" }

// truncatingEmbedder also implements the embed.Truncator method.
type truncatingEmbedder struct {
	*fakeEmbedder
	TruncatedFunc func(text string) bool
}

func (f truncatingEmbedder) Truncated(text string) bool { return f.TruncatedFunc(text) }

const testDim = 4

// vec returns a unit vector whose cosine similarity with vec(1) is sim.
func vec(sim float64) []float32 {
	return []float32{float32(sim), float32(math.Sqrt(1 - sim*sim)), 0, 0}
}

// vectorEmbedder embeds the texts of vectors; any other text is an error, so a
// test names every text it uses.
func vectorEmbedder(vectors map[string][]float32) *fakeEmbedder {
	return &fakeEmbedder{Dim: testDim, EmbedFunc: func(_ context.Context, texts []string) ([][]float32, error) {
		out := make([][]float32, len(texts))
		for i, t := range texts {
			v, ok := vectors[t]
			if !ok {
				return nil, fmt.Errorf("no test vector for %q", t)
			}
			out[i] = v
		}
		return out, nil
	}}
}

// memIndex is a brute-force Index.
type memIndex struct {
	mu    sync.Mutex
	items map[string]IndexItem
}

func newMemIndex() *memIndex { return &memIndex{items: map[string]IndexItem{}} }

func (m *memIndex) Upsert(_ context.Context, items []IndexItem) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range items {
		m.items[it.Entry.Key] = it
	}
	return nil
}

func (m *memIndex) Search(_ context.Context, q SearchQuery) ([]Match, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	var out []Match
	for _, it := range m.items {
		if it.Entry.Partition != q.Partition || it.Entry.Fingerprint != q.Fingerprint || it.Entry.Expired(now) {
			continue
		}
		var dot float32
		for i := range it.Vector {
			dot += it.Vector[i] * q.Vector[i]
		}
		if dot >= q.Threshold {
			out = append(out, Match{Entry: it.Entry, Score: dot})
		}
	}
	slices.SortFunc(out, func(a, b Match) int { return -cmpFloat(a.Score, b.Score) })
	return out[:min(len(out), max(q.Limit, 1))], nil
}

func cmpFloat(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *memIndex) Get(_ context.Context, key string) (Entry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[key]
	return it.Entry, ok, nil
}

func (m *memIndex) DeletePartition(_ context.Context, partition string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, it := range m.items {
		if partition == "" || it.Entry.Partition == partition {
			delete(m.items, k)
		}
	}
	return nil
}

func (m *memIndex) Len(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items), nil
}

func (m *memIndex) Close() error { return nil }

// fakeIndex is memIndex with overridable methods.
type fakeIndex struct {
	*memIndex
	SearchFunc func(ctx context.Context, q SearchQuery) ([]Match, error)
	UpsertFunc func(ctx context.Context, items []IndexItem) error
}

func (f *fakeIndex) Search(ctx context.Context, q SearchQuery) ([]Match, error) {
	if f.SearchFunc != nil {
		return f.SearchFunc(ctx, q)
	}
	return f.memIndex.Search(ctx, q)
}

func (f *fakeIndex) Upsert(ctx context.Context, items []IndexItem) error {
	if f.UpsertFunc != nil {
		return f.UpsertFunc(ctx, items)
	}
	return f.memIndex.Upsert(ctx, items)
}

var _ Index = (*fakeIndex)(nil)

// clock is a settable Now. It starts at the real time so ristretto's TTLs,
// which run on the real clock, stay positive.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func chatKey(t *testing.T, partition, system, query string) Key {
	t.Helper()
	return chatKeyModel(t, partition, "m", system, query)
}

// chatKeyModel builds a semantic key the way an API's key function does
// (proxy/wire/openai.ChatKey, with every model in one cache group): the exact
// key over the whole canonical request, the fingerprint over the context
// without the final user text (the system prompt; the group, not the model),
// and that text as the query. The cache's tests do not depend on an API.
func chatKeyModel(t *testing.T, partition, model, system, query string) Key {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":%q},{"role":"user","content":%q}]}`, model, system, query)
	obj, err := DecodeObject([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	canon, err := CanonicalValue(obj)
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Partition: partition, Endpoint: "/test/chat",
		Exact: Digest("breakwater-exact-v1", []byte(partition), []byte("/test/chat"), canon)}
	k.Query = query
	k.Fingerprint = Digest("test-fingerprint", []byte("group"), []byte(system))
	return k
}

func newCache(t *testing.T, opts Options) *Cache {
	t.Helper()
	c := New(opts)
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c
}

// waitIndexed waits until idx holds n entries.
func waitIndexed(t *testing.T, idx Index, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := idx.Len(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("index holds %d entries, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const (
	qBase  = "What is the capital of France?"
	qPara  = "what's france's capital city"  // similarity 0.95
	qFar   = "what is the capital of Spain?" // similarity 0.85
	qOther = "how do I bake bread"           // similarity 0.10
)

func standardVectors() map[string][]float32 {
	return map[string][]float32{qBase: vec(1), qPara: vec(0.95), qFar: vec(0.85), qOther: vec(0.10)}
}

// semanticCache is a cache with the brute-force index, the standard vectors
// and threshold 0.9, holding one stored answer to qBase in partition "A".
func semanticCache(t *testing.T, mod func(*Options)) (*Cache, *memIndex, *clock) {
	t.Helper()
	idx := newMemIndex()
	clk := newClock()
	opts := Options{Index: idx, Embedder: vectorEmbedder(standardVectors()), Threshold: 0.9, Now: clk.Now}
	if mod != nil {
		mod(&opts)
	}
	c := newCache(t, opts)
	c.Store(t.Context(), chatKey(t, "A", "S", qBase), Entry{Model: "m", Body: []byte("paris")})
	waitIndexed(t, idx, 1)
	return c, idx, clk
}

func TestLookupExactRepeat(t *testing.T) {
	c, _, clk := semanticCache(t, nil)
	clk.Advance(time.Minute)
	r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qBase), LookupOptions{})
	if !ok {
		t.Fatal("repeat missed")
	}
	if got, want := r.Tier, TierExact; got != want {
		t.Errorf("Tier = %q, want %q", got, want)
	}
	if got, want := string(r.Entry.Body), "paris"; got != want {
		t.Errorf("Body = %q, want %q", got, want)
	}
	if got, want := r.Age, time.Minute; got != want {
		t.Errorf("Age = %v, want %v", got, want)
	}
	if got, want := r.Similarity, float32(1); got != want {
		t.Errorf("Similarity = %v, want %v", got, want)
	}
}

func TestLookupSemanticHit(t *testing.T) {
	c, _, _ := semanticCache(t, nil)
	k := chatKey(t, "A", "S", qPara)
	r, ok := c.Lookup(t.Context(), k, LookupOptions{})
	if !ok {
		t.Fatal("paraphrase missed")
	}
	if got, want := r.Tier, TierSemantic; got != want {
		t.Errorf("Tier = %q, want %q", got, want)
	}
	if r.Similarity < 0.949 || r.Similarity > 0.951 {
		t.Errorf("Similarity = %v, want 0.95", r.Similarity)
	}
	if got, want := r.Entry.Query, qBase; got != want {
		t.Errorf("matched Query = %q, want %q", got, want)
	}
	if r.Verified {
		t.Error("a hit decided by the static threshold is Verified")
	}
	// Served, handed to Promote: an unverified hit is not laundered into
	// the exact tier; the next lookup goes through the semantic tier again.
	c.Promote(k, r)
	r, ok = c.Lookup(t.Context(), k, LookupOptions{})
	if !ok || r.Tier != TierSemantic {
		t.Fatalf("second lookup = %q, %v; want a semantic hit again (no promotion without a verdict)", r.Tier, ok)
	}
	if got := c.Stats(t.Context()).Promotions; got != 0 {
		t.Errorf("Promotions = %d, want 0", got)
	}
}

func TestPromoteVerifiedHit(t *testing.T) {
	v := &scriptVerifier{floor: 0.8, verdicts: map[string]bool{qBase: true}}
	c, _, _ := semanticCache(t, func(o *Options) { o.Verifier = v })
	k := chatKey(t, "A", "S", qPara)
	r, ok := c.Lookup(t.Context(), k, LookupOptions{})
	if !ok || !r.Verified {
		t.Fatalf("Lookup = %+v, %v; want a verified semantic hit", r, ok)
	}
	// Looked up but not served (a sampled hit): nothing is written.
	if r2, ok := c.Lookup(t.Context(), k, LookupOptions{}); !ok || r2.Tier != TierSemantic {
		t.Fatalf("lookup before Promote = %q, %v; want semantic (Lookup itself promotes nothing)", r2.Tier, ok)
	}
	c.Promote(k, r)
	r, ok = c.Lookup(t.Context(), k, LookupOptions{})
	if !ok || r.Tier != TierExact {
		t.Fatalf("lookup after Promote = %q, %v; want an exact hit", r.Tier, ok)
	}
	if got, want := string(r.Entry.Body), "paris"; got != want {
		t.Errorf("promoted Body = %q, want %q", got, want)
	}
	if got, want := r.Entry.Key, k.Exact; got != want {
		t.Errorf("promoted Key = %q, want the new request's key %q", got, want)
	}
	if got, want := c.Stats(t.Context()).Promotions, uint64(1); got != want {
		t.Errorf("Promotions = %d, want %d", got, want)
	}
}

func TestPromoteNoVerdictFallback(t *testing.T) {
	v := &scriptVerifier{floor: 0.8, noVerdict: true}
	c, _, _ := semanticCache(t, func(o *Options) { o.Verifier = v })
	k := chatKey(t, "A", "S", qPara)
	r, ok := c.Lookup(t.Context(), k, LookupOptions{})
	if !ok || r.Verified {
		t.Fatalf("Lookup = %+v, %v; want an unverified semantic hit (static fallback)", r, ok)
	}
	c.Promote(k, r)
	if r, ok := c.Lookup(t.Context(), k, LookupOptions{}); !ok || r.Tier != TierSemantic {
		t.Errorf("after Promote of an unverified hit: %q, %v; want semantic", r.Tier, ok)
	}
}

func TestLookupMisses(t *testing.T) {
	tests := []struct {
		name string
		key  func(t *testing.T) Key
		opt  LookupOptions
	}{
		{"other tenant, same request", func(t *testing.T) Key { return chatKey(t, "B", "S", qBase) }, LookupOptions{}},
		{"other tenant, paraphrase", func(t *testing.T) Key { return chatKey(t, "B", "S", qPara) }, LookupOptions{}},
		{"other fingerprint", func(t *testing.T) Key { return chatKey(t, "A", "another system prompt", qPara) }, LookupOptions{}},
		{"below threshold", func(t *testing.T) Key { return chatKey(t, "A", "S", qFar) }, LookupOptions{}},
		{"unrelated", func(t *testing.T) Key { return chatKey(t, "A", "S", qOther) }, LookupOptions{}},
		{"header raises threshold", func(t *testing.T) Key { return chatKey(t, "A", "S", qPara) }, LookupOptions{Threshold: 0.99}},
		{"header cannot lower threshold", func(t *testing.T) Key { return chatKey(t, "A", "S", qFar) }, LookupOptions{Threshold: 0.5}},
		{"skip semantic", func(t *testing.T) Key { return chatKey(t, "A", "S", qPara) }, LookupOptions{SkipSemantic: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := semanticCache(t, nil)
			if r, ok := c.Lookup(t.Context(), tt.key(t), tt.opt); ok {
				t.Errorf("Lookup hit (%s, similarity %v), want a miss", r.Tier, r.Similarity)
			}
		})
	}
}

// leakyIndex ignores the partition and fingerprint filters, as a buggy
// backend might; the cache must still not serve across them.
func TestLookupDistrustsIndexFilter(t *testing.T) {
	var idx *fakeIndex
	c, _, _ := semanticCache(t, func(o *Options) {
		idx = &fakeIndex{memIndex: o.Index.(*memIndex)}
		idx.SearchFunc = func(ctx context.Context, q SearchQuery) ([]Match, error) {
			idx.mu.Lock()
			defer idx.mu.Unlock()
			var out []Match
			for _, it := range idx.items {
				out = append(out, Match{Entry: it.Entry, Score: 1})
			}
			return out, nil
		}
		o.Index = idx
	})
	for _, k := range []Key{chatKey(t, "B", "S", qPara), chatKey(t, "A", "other", qPara)} {
		if r, ok := c.Lookup(t.Context(), k, LookupOptions{}); ok {
			t.Errorf("Lookup served %s entry of partition %s to partition %s", r.Tier, r.Entry.Partition, k.Partition)
		}
	}
}

func TestLookupMaxAge(t *testing.T) {
	c, _, clk := semanticCache(t, nil)
	clk.Advance(10 * time.Minute)
	for _, q := range []string{qBase, qPara} {
		k := chatKey(t, "A", "S", q)
		if _, ok := c.Lookup(t.Context(), k, LookupOptions{MaxAge: 5 * time.Minute}); ok {
			t.Errorf("%q: 10-minute-old entry served with max-age 5m", q)
		}
		r, ok := c.Lookup(t.Context(), k, LookupOptions{MaxAge: time.Hour})
		if !ok {
			t.Fatalf("%q: 10-minute-old entry missed with max-age 1h", q)
		}
		if got, want := r.Age, 10*time.Minute; got != want {
			t.Errorf("%q: Age = %v, want %v", q, got, want)
		}
	}
}

func TestLookupTTL(t *testing.T) {
	c, _, clk := semanticCache(t, func(o *Options) { o.TTL = time.Hour })
	clk.Advance(59 * time.Minute)
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qBase), LookupOptions{SkipSemantic: true}); !ok {
		t.Error("entry missed before its TTL")
	}
	clk.Advance(2 * time.Minute)
	for _, q := range []string{qBase, qPara} {
		if r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", q), LookupOptions{}); ok {
			t.Errorf("%q: expired entry served from the %s tier", q, r.Tier)
		}
	}
}

func TestEmbedderDown(t *testing.T) {
	var down atomic.Bool
	good := vectorEmbedder(standardVectors())
	emb := &fakeEmbedder{Dim: testDim, EmbedFunc: func(ctx context.Context, texts []string) ([][]float32, error) {
		if down.Load() {
			return nil, errors.New("connection refused")
		}
		return good.EmbedFunc(ctx, texts)
	}}
	c, _, _ := semanticCache(t, func(o *Options) { o.Embedder = emb })
	down.Store(true)

	if r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qBase), LookupOptions{}); !ok || r.Tier != TierExact {
		t.Errorf("exact lookup with the embedder down = %q, %v; want an exact hit", r.Tier, ok)
	}
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{}); ok {
		t.Error("semantic lookup hit with the embedder down")
	}
	if err := c.Health()[ComponentEmbedder]; err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Health()[embedder] = %v, want the embedder's error", err)
	}
	if got := c.Stats(t.Context()).EmbedErrors; got == 0 {
		t.Error("EmbedErrors = 0, want the failure counted")
	}

	down.Store(false)
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{}); !ok {
		t.Error("semantic lookup missed after the embedder recovered")
	}
	if h := c.Health(); len(h) != 0 {
		t.Errorf("Health() = %v after recovery, want empty", h)
	}
}

func TestIndexDown(t *testing.T) {
	var idx *fakeIndex
	c, _, _ := semanticCache(t, func(o *Options) {
		idx = &fakeIndex{memIndex: o.Index.(*memIndex)}
		o.Index = idx
	})
	idx.SearchFunc = func(context.Context, SearchQuery) ([]Match, error) { return nil, errors.New("index unreachable") }
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{}); ok {
		t.Error("semantic lookup hit with the index down")
	}
	if r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qBase), LookupOptions{}); !ok || r.Tier != TierExact {
		t.Errorf("exact lookup with the index down = %q, %v; want an exact hit", r.Tier, ok)
	}
	if c.Health()[ComponentIndex] == nil {
		t.Error("Health() does not report the index")
	}
	if got := c.Stats(t.Context()).IndexErrors; got == 0 {
		t.Error("IndexErrors = 0, want the failure counted")
	}
}

func TestLongTextRule(t *testing.T) {
	long1 := "Summarise this contract: " + strings.Repeat("clause ", 50) + "ending one"
	long2 := "Summarise this contract: " + strings.Repeat("clause ", 50) + "ending two"
	short := "Summarise this contract"
	emb := truncatingEmbedder{
		fakeEmbedder: vectorEmbedder(map[string][]float32{long1: vec(1), long2: vec(1), short: vec(1)}),
		// Both texts share the prefix the embedder sees, hence one vector.
		TruncatedFunc: func(s string) bool { return len(s) > 100 },
	}
	idx := newMemIndex()
	c := newCache(t, Options{Index: idx, Embedder: emb, Threshold: 0.9})
	c.Store(t.Context(), chatKeyModel(t, "A", "m1", "S", long1), Entry{Body: []byte("one")})
	// A truncated text is no semantic candidate: Store does not queue it.
	if st := c.Stats(t.Context()); st.QueueDepth != 0 || st.IndexEntries != 0 {
		t.Errorf("a truncated text was queued or indexed: %+v", st)
	}
	if r, ok := c.Lookup(t.Context(), chatKeyModel(t, "A", "m1", "S", long1), LookupOptions{}); !ok || r.Tier != TierExact {
		t.Errorf("the same long request = %q, %v; want an exact hit", r.Tier, ok)
	}
	if _, ok := c.Lookup(t.Context(), chatKeyModel(t, "A", "m1", "S", long2), LookupOptions{}); ok {
		t.Error("different truncated texts served each other's answer")
	}
	// Even the same long text from another model of the same cache group (a
	// different exact key) is not matched by its vector: as a query it is
	// exact-only.
	if r, ok := c.Lookup(t.Context(), chatKeyModel(t, "A", "m2", "S", long1), LookupOptions{}); ok {
		t.Errorf("identical long text under another exact key = %q, want a miss", r.Tier)
	}
	if got, want := c.Stats(t.Context()).ExactOnly, uint64(2); got != want {
		t.Errorf("ExactOnly = %d, want %d", got, want)
	}
	// As an entry (written before this rule, or by another replica): a
	// short query whose vector meets it is not served.
	e := Entry{Key: "legacy", Partition: "A", Query: long1, Body: []byte("one")}
	k := chatKeyModel(t, "A", "m1", "S", short)
	e.Fingerprint = k.Fingerprint
	if err := idx.Upsert(t.Context(), []IndexItem{{Entry: e, Vector: vec(1)}}); err != nil {
		t.Fatal(err)
	}
	if r, ok := c.Lookup(t.Context(), k, LookupOptions{}); ok {
		t.Errorf("a truncated entry answered a short query (%q)", r.Tier)
	}
	if got, want := c.Stats(t.Context()).LongTextRejections, uint64(1); got != want {
		t.Errorf("LongTextRejections = %d, want %d", got, want)
	}
}

// A query longer than MaxQueryBytes is served by the exact tier alone: it
// is neither embedded nor written to the index, and the stored entry does
// not hold it (a large prompt is kept once, in the request).
func TestLongQueryExactTierOnly(t *testing.T) {
	long := strings.Repeat("word ", MaxQueryBytes/5+1)
	emb := vectorEmbedder(map[string][]float32{long: vec(1), qBase: vec(1)})
	var embeddedLong atomic.Int64
	inner := emb.EmbedFunc
	emb.EmbedFunc = func(ctx context.Context, texts []string) ([][]float32, error) {
		for _, t := range texts {
			if len(t) > MaxQueryBytes {
				embeddedLong.Add(1)
			}
		}
		return inner(ctx, texts)
	}
	idx := newMemIndex()
	c := newCache(t, Options{Index: idx, Embedder: emb, Threshold: 0.9})
	k := chatKey(t, "A", "S", long)
	if k.SemanticEligible() {
		t.Errorf("a query of %d bytes is eligible for the semantic tier (MaxQueryBytes %d)", len(long), MaxQueryBytes)
	}
	c.Store(t.Context(), k, Entry{Model: "m", Body: []byte("answer")})
	c.Store(t.Context(), chatKey(t, "A", "S", qBase), Entry{Model: "m", Body: []byte("paris")})
	waitIndexed(t, idx, 1) // the short question's entry only
	r, ok := c.Lookup(t.Context(), k, LookupOptions{})
	if !ok || r.Tier != TierExact || string(r.Entry.Body) != "answer" {
		t.Fatalf("repeat of the long question = %q %q, %v; want an exact hit", r.Tier, r.Entry.Body, ok)
	}
	if r.Entry.Query != "" {
		t.Errorf("the exact tier holds the %d-byte query of an exact-only entry", len(r.Entry.Query))
	}
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", long+"!"), LookupOptions{}); ok {
		t.Error("another long question was answered")
	}
	if n := embeddedLong.Load(); n != 0 {
		t.Errorf("the embedder was given %d long queries, want 0", n)
	}
	k.DropLongQuery()
	if k.Query != "" {
		t.Error("DropLongQuery kept a long query")
	}
	short := chatKey(t, "A", "S", qBase)
	if short.DropLongQuery(); short.Query != qBase {
		t.Errorf("DropLongQuery changed a short query to %q", short.Query)
	}
}

func TestGuard(t *testing.T) {
	guard := func(query, candidate string) (bool, string) {
		if strings.Contains(query, "Spain") != strings.Contains(candidate, "Spain") {
			return false, "capitalised_name"
		}
		return true, ""
	}
	c, _, _ := semanticCache(t, func(o *Options) { o.Threshold = 0.8; o.Guard = guard })
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qFar), LookupOptions{}); ok {
		t.Error("guard did not reject the candidate")
	}
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{}); !ok {
		t.Error("guard rejected an acceptable candidate")
	}
	if got, want := c.Stats(t.Context()).GuardRejections["capitalised_name"], uint64(1); got != want {
		t.Errorf(`GuardRejections["capitalised_name"] = %d, want %d`, got, want)
	}
}

func TestFlush(t *testing.T) {
	c, idx, _ := semanticCache(t, nil)
	c.Store(t.Context(), chatKey(t, "B", "S", qBase), Entry{Body: []byte("paris for B")})
	waitIndexed(t, idx, 2)
	if err := c.Flush(t.Context(), "A"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{qBase, qPara} {
		if r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", q), LookupOptions{}); ok {
			t.Errorf("A %q: flushed entry served from the %s tier", q, r.Tier)
		}
		if _, ok := c.Lookup(t.Context(), chatKey(t, "B", "S", q), LookupOptions{}); !ok {
			t.Errorf("B %q: missed after flushing A", q)
		}
	}
	if err := c.Flush(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	s := c.Stats(t.Context())
	if s.ExactEntries != 0 || s.IndexEntries != 0 {
		t.Errorf("after flushing all: %d exact, %d index entries; want none", s.ExactEntries, s.IndexEntries)
	}
}

func TestNoSemanticTier(t *testing.T) {
	c := newCache(t, Options{})
	k := chatKey(t, "A", "S", qBase)
	c.Store(t.Context(), k, Entry{Body: []byte("paris")})
	if r, ok := c.Lookup(t.Context(), k, LookupOptions{}); !ok || r.Tier != TierExact {
		t.Errorf("Lookup = %q, %v; want an exact hit", r.Tier, ok)
	}
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{}); ok {
		t.Error("paraphrase hit without a semantic tier")
	}
	s := c.Stats(t.Context())
	if got, want := s.IndexEntries, -1; got != want {
		t.Errorf("IndexEntries = %d, want %d", got, want)
	}
	if got, want := s.ExactEntries, 1; got != want {
		t.Errorf("ExactEntries = %d, want %d", got, want)
	}
}

func TestStoreFillsEntry(t *testing.T) {
	clk := newClock()
	c := newCache(t, Options{TTL: time.Hour, Now: clk.Now})
	k := chatKey(t, "A", "S", qBase)
	c.Store(t.Context(), k, Entry{Model: "m", Body: []byte("b")})
	r, ok := c.Lookup(t.Context(), k, LookupOptions{})
	if !ok {
		t.Fatal("miss after Store")
	}
	e := r.Entry
	if e.Key != k.Exact || e.Partition != "A" || e.Fingerprint != k.Fingerprint || e.Query != qBase {
		t.Errorf("stored entry %+v does not carry the key's fields", e)
	}
	if got, want := e.Expires.Sub(e.Created), time.Hour; got != want {
		t.Errorf("Expires - Created = %v, want %v", got, want)
	}
}

// TestConcurrentTenants runs stores, lookups and flushes of two tenants at
// once (meant for -race) and checks that no lookup crosses tenants.
func TestConcurrentTenants(t *testing.T) {
	c, _, _ := semanticCache(t, nil)
	var wg sync.WaitGroup
	var crossed atomic.Int64
	for _, p := range []string{"A", "B"} {
		wg.Go(func() {
			for i := range 100 {
				q := []string{qBase, qPara, qFar}[i%3]
				k := chatKey(t, p, "S", q)
				if r, ok := c.Lookup(t.Context(), k, LookupOptions{}); ok && (r.Entry.Partition != p || strings.HasPrefix(string(r.Entry.Body), "answer for ") && string(r.Entry.Body) != "answer for "+p) {
					crossed.Add(1)
				}
				c.Store(t.Context(), k, Entry{Body: []byte("answer for " + p)})
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			if err := c.Flush(t.Context(), "B"); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	if got := crossed.Load(); got != 0 {
		t.Errorf("%d lookups were served another tenant's entry", got)
	}
}

// TestExactEntriesOfAnotherReplica: two caches (two replicas) share one
// index; a question answered through the first is an exact hit through the
// second, found by its exact key in the index, and only for its tenant.
func TestExactEntriesOfAnotherReplica(t *testing.T) {
	c1, idx, clk := semanticCache(t, nil)
	_ = c1
	c2 := newCache(t, Options{Index: idx, Embedder: vectorEmbedder(standardVectors()), Threshold: 0.9, Now: clk.Now})
	r, ok := c2.Lookup(t.Context(), chatKey(t, "A", "S", qBase), LookupOptions{})
	if !ok || r.Tier != TierExact || string(r.Entry.Body) != "paris" {
		t.Fatalf("replica 2: ok=%v tier=%q body=%q, want an exact hit of replica 1's entry", ok, r.Tier, r.Entry.Body)
	}
	if _, ok := c2.Lookup(t.Context(), chatKey(t, "B", "S", qBase), LookupOptions{}); ok {
		t.Error("replica 2 served tenant A's entry to tenant B")
	}
	// Found once, it is in replica 2's own exact tier: the index is not asked again.
	idx.mu.Lock()
	idx.items = map[string]IndexItem{}
	idx.mu.Unlock()
	if r, ok := c2.Lookup(t.Context(), chatKey(t, "A", "S", qBase), LookupOptions{}); !ok || r.Tier != TierExact {
		t.Errorf("second lookup on replica 2: ok=%v tier=%q, want an exact hit from its own tier", ok, r.Tier)
	}
}
