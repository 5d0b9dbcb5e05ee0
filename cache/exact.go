package cache

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// DefaultExactMaxBytes bounds the exact tier when Options.Exact is nil.
const DefaultExactMaxBytes = 64 << 20

// Exact is the in-process exact tier: entries by exact key, bounded in bytes,
// on ristretto. It is safe for concurrent use.
//
// Ristretto admits new keys through TinyLFU: when the tier is full, a new
// entry whose key is seen less often than the entries it would evict is
// rejected. A Set is therefore "stored unless the policy declines", never an
// error; a declined entry is simply a later miss.
type Exact struct {
	c *ristretto.Cache[string, *exactItem]
	// seq numbers every Set; a flush records the sequence number at which it
	// happened and entries at or below it read as misses.
	seq     atomic.Uint64
	flushes atomic.Pointer[flushMarks]
	flushMu sync.Mutex // serialises writers of flushes
	// closeMu keeps Close from closing ristretto's channels under a Get, Set
	// or Del, which would panic.
	closeMu sync.RWMutex
	closed  bool
}

type exactItem struct {
	e   Entry
	seq uint64
}

// flushMarks is immutable once published; DeletePartition swaps in a copy.
type flushMarks struct {
	all   uint64
	parts map[string]uint64
}

func (f *flushMarks) flushed(partition string, seq uint64) bool {
	return seq <= f.all || seq <= f.parts[partition]
}

// NewExact returns an exact tier holding at most about maxBytes of entries,
// as measured by Entry.Size.
func NewExact(maxBytes int64) (*Exact, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("create exact cache: max bytes must be positive, got %d", maxBytes)
	}
	// Ristretto wants about ten counters per entry it may hold; entries are
	// completions of a few KiB, so one per KiB gives headroom.
	counters := max(maxBytes/1024*10, 10_000)
	c, err := ristretto.NewCache(&ristretto.Config[string, *exactItem]{
		NumCounters:        min(counters, 100_000_000),
		MaxCost:            maxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true, // Entry.Size already counts overhead
	})
	if err != nil {
		return nil, fmt.Errorf("create exact cache: %w", err)
	}
	x := &Exact{c: c}
	x.flushes.Store(&flushMarks{parts: map[string]uint64{}})
	return x, nil
}

// Get returns the entry stored under key, unless it has expired at now or its
// partition was flushed after it was stored. The entry's Body is shared:
// callers must not modify it.
func (x *Exact) Get(key string, now time.Time) (Entry, bool) {
	x.closeMu.RLock()
	it, ok := x.c.Get(key)
	x.closeMu.RUnlock()
	if !ok || it == nil {
		return Entry{}, false
	}
	if it.e.Expired(now) || x.flushes.Load().flushed(it.e.Partition, it.seq) {
		return Entry{}, false
	}
	return it.e, true
}

// Set stores e under e.Key with cost e.Size() until e.Expires, and waits for
// the write to be applied so that the next Get sees it: the design writes the
// exact tier before the response completes, and a client repeating at once
// must hit. The wait is one round trip to ristretto's apply goroutine:
// BenchmarkExactSet measured 6.2µs per Set with it and 1.2µs without on a
// busy 2-core box, negligible beside an upstream call. An entry that has
// already expired is not stored.
func (x *Exact) Set(e Entry) {
	var ttl time.Duration
	if !e.Expires.IsZero() {
		if ttl = time.Until(e.Expires); ttl <= 0 {
			return
		}
	}
	x.closeMu.RLock()
	defer x.closeMu.RUnlock()
	if x.closed {
		return
	}
	it := &exactItem{e: e, seq: x.seq.Add(1)}
	if x.c.SetWithTTL(e.Key, it, e.Size(), ttl) {
		x.c.Wait()
	}
}

// DeletePartition makes every entry of partition stored so far a miss; ""
// does so for every partition. Ristretto cannot delete by attribute, so the
// flush is recorded as a sequence mark checked on every Get, then the matching
// keys are found by a scan and deleted to give their bytes back.
func (x *Exact) DeletePartition(partition string) {
	x.flushMu.Lock()
	mark := x.seq.Load()
	old := x.flushes.Load()
	next := &flushMarks{all: old.all, parts: make(map[string]uint64, len(old.parts)+1)}
	if partition == "" {
		next.all = mark
		// Older per-partition marks are all below the new global one.
	} else {
		for p, s := range old.parts {
			if s > next.all {
				next.parts[p] = s
			}
		}
		next.parts[partition] = mark
	}
	x.flushes.Store(next)
	x.flushMu.Unlock()

	x.closeMu.RLock()
	defer x.closeMu.RUnlock()
	if x.closed {
		return
	}
	var keys []string
	x.c.IterValues(func(it *exactItem) bool {
		if it != nil && it.seq <= mark && (partition == "" || it.e.Partition == partition) {
			keys = append(keys, it.e.Key)
		}
		return false
	})
	for _, k := range keys {
		x.c.Del(k)
	}
	x.c.Wait()
}

// Len returns the number of entries that would be served now. It scans the
// tier, so it is meant for stats, not for hot paths.
func (x *Exact) Len() int {
	x.closeMu.RLock()
	defer x.closeMu.RUnlock()
	now := time.Now()
	marks := x.flushes.Load()
	n := 0
	x.c.IterValues(func(it *exactItem) bool {
		if it != nil && !it.e.Expired(now) && !marks.flushed(it.e.Partition, it.seq) {
			n++
		}
		return false
	})
	return n
}

// Close stops ristretto's goroutines and drops every entry. It is safe to
// call twice, and concurrently with other methods; a closed tier misses on
// Get and ignores Set.
func (x *Exact) Close() {
	x.closeMu.Lock()
	defer x.closeMu.Unlock()
	if !x.closed {
		x.closed = true
		x.c.Close()
	}
}
