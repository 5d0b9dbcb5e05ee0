package embed

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
)

// cachedEntryOverhead estimates the bytes an entry costs beyond its vector
// and text: ristretto's store and policy records, map slots, and the string
// and slice headers of the value. It keeps the byte bound honest for short
// texts; the estimate errs high.
const cachedEntryOverhead = 192

// Cached is an Embedder that remembers vectors in memory, bounded in bytes,
// and sends only the texts it has not seen to the inner embedder, in one
// call. The vector of a text under a model never changes, so entries do not
// expire; they are evicted by ristretto's admission and eviction policy
// (TinyLFU, sampled LFU) when the bound is reached. Safe for concurrent use.
//
// Vectors returned by Embed are copies: callers may modify them.
type Cached struct {
	inner  Embedder
	cache  *ristretto.Cache[string, cachedVector]
	hits   atomic.Uint64
	misses atomic.Uint64

	// inflight holds the texts being embedded right now, so that callers
	// asking for one of them at the same time wait for that computation
	// instead of starting their own.
	mu       sync.Mutex
	inflight map[string]*embedFlight
	waiting  atomic.Int64 // callers waiting on another's flight (for tests)
}

// embedFlight is one text being embedded; vec and err are set before done
// is closed.
type embedFlight struct {
	done chan struct{}
	vec  []float32
	err  error
}

// cachedVector keeps the full text next to its vector, so a hash collision
// is a miss, never another text's vector.
type cachedVector struct {
	text string
	vec  []float32
}

var (
	_ Embedder  = (*Cached)(nil)
	_ Truncator = (*Cached)(nil)
	_ Coverer   = (*Cached)(nil)
)

// DefaultCacheBytes is the memory budget of the text → vector cache the
// configuration gives NewCached: 32 MiB.
const DefaultCacheBytes = 32 << 20

// NewCached wraps e with a cache of at most maxBytes (estimated as 4 bytes
// per vector component plus the text length plus a fixed per-entry
// overhead). Call Close when done to stop the cache's goroutines.
func NewCached(e Embedder, maxBytes int64) (*Cached, error) {
	return newCached(e, maxBytes, nil)
}

// newCached lets tests replace the key hash (to force collisions).
func newCached(e Embedder, maxBytes int64, keyHash func(text string) (uint64, uint64)) (*Cached, error) {
	if e == nil {
		return nil, errors.New("new embedding cache: nil embedder")
	}
	if maxBytes <= 0 {
		return nil, fmt.Errorf("new embedding cache: max bytes %d is not positive", maxBytes)
	}
	if keyHash == nil {
		keyHash = nameTextHash(e.Name())
	}
	// Ristretto wants ~10 counters per entry it may hold; guess the entry
	// size from the dimension (unknown before an OpenAI probe) and a
	// typical query length.
	dim := max(e.Dimension(), 256)
	counters := min(max(10*maxBytes/cachedEntryCost(dim, 64), 1000), 1<<24)
	cache, err := ristretto.NewCache(&ristretto.Config[string, cachedVector]{
		NumCounters:        counters,
		MaxCost:            maxBytes,
		BufferItems:        64,
		KeyToHash:          keyHash,
		IgnoreInternalCost: true, // cachedEntryOverhead accounts for it
	})
	if err != nil {
		return nil, fmt.Errorf("new embedding cache: %w", err)
	}
	return &Cached{inner: e, cache: cache, inflight: map[string]*embedFlight{}}, nil
}

// nameTextHash returns ristretto's key and conflict hashes for a text under
// the embedder name, from two independent seeds: 128 bits in all, and the
// stored text is compared on every hit anyway.
func nameTextHash(name string) func(string) (uint64, uint64) {
	seed1, seed2 := maphash.MakeSeed(), maphash.MakeSeed()
	return func(text string) (uint64, uint64) {
		var h maphash.Hash
		h.SetSeed(seed1)
		h.WriteString(name)
		h.WriteByte(0)
		h.WriteString(text)
		k := h.Sum64()
		h.SetSeed(seed2)
		h.WriteString(name)
		h.WriteByte(0)
		h.WriteString(text)
		return k, h.Sum64()
	}
}

// cachedEntryCost is the byte cost charged for one entry.
func cachedEntryCost(dim, textLen int) int64 {
	return int64(4*dim + textLen + cachedEntryOverhead)
}

// Embed returns one vector per text, from the cache where it can and from
// one call to the inner embedder for the rest (each distinct text once).
// A text another call is embedding at the same moment is not sent again:
// this call waits for that result (and embeds the text itself only if that
// call failed). A cancelled ctx is an error even when every text is cached.
func (c *Cached) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return [][]float32{}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("embed texts: %w", err)
	}
	// out holds the cache's own vectors until they are copied below.
	out := make([][]float32, len(texts))
	var miss []int
	for i, t := range texts {
		if v, ok := c.cache.Get(t); ok && v.text == t {
			out[i] = v.vec
			continue
		}
		miss = append(miss, i)
	}
	c.hits.Add(uint64(len(texts) - len(miss)))
	if len(miss) > 0 {
		if err := c.fillShared(ctx, texts, miss, out); err != nil {
			return nil, err
		}
	}
	// One allocation for all copies. The three-index slices stop an append
	// on one vector from writing into the next.
	total := 0
	for _, v := range out {
		total += len(v)
	}
	buf := make([]float32, total)
	for i, v := range out {
		n := copy(buf, v)
		out[i], buf = buf[:n:n], buf[n:]
	}
	return out, nil
}

// fillShared embeds the texts at positions miss that no other call is
// embedding, and waits for the others' results.
func (c *Cached) fillShared(ctx context.Context, texts []string, miss []int, out [][]float32) error {
	var (
		owned   []int
		flights []*embedFlight
		waits   []int
		waitFor []*embedFlight
	)
	var mine map[string]bool // texts this call embeds (a repeat is its own miss)
	if len(miss) > 1 {
		mine = make(map[string]bool, len(miss))
	}
	c.mu.Lock()
	for _, i := range miss {
		if mine[texts[i]] {
			owned, flights = append(owned, i), append(flights, nil)
			continue
		}
		if f, ok := c.inflight[texts[i]]; ok {
			waits, waitFor = append(waits, i), append(waitFor, f)
			continue
		}
		if mine != nil {
			mine[texts[i]] = true
		}
		f := &embedFlight{done: make(chan struct{})}
		c.inflight[texts[i]] = f
		owned, flights = append(owned, i), append(flights, f)
	}
	c.mu.Unlock()
	if len(owned) > 0 {
		c.misses.Add(uint64(len(owned)))
		err := c.fill(ctx, texts, owned, out)
		// The vectors are in the cache (fill waited for ristretto) before
		// the flights leave the map, so a later caller finds one or the other.
		c.mu.Lock()
		for k, i := range owned {
			if f := flights[k]; f != nil {
				f.vec, f.err = out[i], err
				delete(c.inflight, texts[i])
			}
		}
		c.mu.Unlock()
		for _, f := range flights {
			if f != nil {
				close(f.done)
			}
		}
		if err != nil {
			return err
		}
	}
	var retry []int
	for k, i := range waits {
		f := waitFor[k]
		c.waiting.Add(1)
		select {
		case <-f.done:
		case <-ctx.Done():
			c.waiting.Add(-1)
			return fmt.Errorf("embed texts: %w", ctx.Err())
		}
		c.waiting.Add(-1)
		if f.err != nil {
			retry = append(retry, i)
			continue
		}
		out[i] = f.vec
	}
	c.hits.Add(uint64(len(waits) - len(retry)))
	if len(retry) > 0 {
		c.misses.Add(uint64(len(retry)))
		return c.fill(ctx, texts, retry, out)
	}
	return nil
}

// fill embeds the texts at positions miss through the inner embedder, caches
// them, and stores them in out.
func (c *Cached) fill(ctx context.Context, texts []string, miss []int, out [][]float32) error {
	uniq := make([]string, 0, len(miss))
	pos := make(map[string]int, len(miss))
	for _, i := range miss {
		if _, ok := pos[texts[i]]; !ok {
			pos[texts[i]] = len(uniq)
			uniq = append(uniq, texts[i])
		}
	}
	vecs, err := c.inner.Embed(ctx, uniq)
	if err != nil {
		return fmt.Errorf("embed %d uncached texts: %w", len(uniq), err)
	}
	if len(vecs) != len(uniq) {
		return fmt.Errorf("embed %d uncached texts: got %d vectors", len(uniq), len(vecs))
	}
	dim := c.inner.Dimension()
	for j, v := range vecs {
		if len(v) == 0 || (dim > 0 && len(v) != dim) {
			return fmt.Errorf("embed %d uncached texts: vector %d has dimension %d, want %d", len(uniq), j, len(v), dim)
		}
	}
	for j, t := range uniq {
		// Clone so that a cached text does not pin a caller's larger
		// buffer (a query sliced out of a request body).
		t = strings.Clone(t)
		c.cache.Set(t, cachedVector{text: t, vec: vecs[j]}, cachedEntryCost(len(vecs[j]), len(t)))
	}
	// Sets are applied asynchronously; waiting makes the next call see them
	// (the wait is tiny next to the inner call just made).
	c.cache.Wait()
	for _, i := range miss {
		out[i] = vecs[pos[texts[i]]]
	}
	return nil
}

// Dimension is the inner embedder's.
func (c *Cached) Dimension() int { return c.inner.Dimension() }

// Name is the inner embedder's: the cache does not change the vectors.
func (c *Cached) Name() string { return c.inner.Name() }

// Truncated forwards to the inner embedder when it implements Truncator.
// Otherwise the inner embedder sees whole texts, and Truncated is false.
func (c *Cached) Truncated(text string) bool {
	if t, ok := c.inner.(Truncator); ok {
		return t.Truncated(text)
	}
	return false
}

// Covers forwards to the inner embedder when it implements Coverer.
// Otherwise it says true: the inner embedder is taken at its word, and the
// cache's own rules (normalisation, length) still apply.
func (c *Cached) Covers(text string) bool {
	if t, ok := c.inner.(Coverer); ok {
		return t.Covers(text)
	}
	return true
}

// Stats returns how many texts were answered from the cache and how many
// were sent to the inner embedder, since NewCached.
func (c *Cached) Stats() (hits, misses uint64) {
	return c.hits.Load(), c.misses.Load()
}

// Close stops the cache's goroutines and drops its entries. It must not run
// concurrently with Embed; after it, Embed sends every text to the inner
// embedder. The inner embedder is not closed.
func (c *Cached) Close() {
	c.cache.Close()
}
