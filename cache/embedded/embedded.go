// Package embedded is the in-process vector index: exact scan for small buckets, HNSW for large ones, persisted in a crash-safe log.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

// Options configure Open. Every zero value means the documented default.
//
// Path and the bounds are also the configuration file's [vector] keys (the
// toml tags; zero:"refused": the file's 0 reaches Validate as a negative
// value, which it refuses).
type Options struct {
	// Path is the directory holding the store ([vector] path); it is
	// created if missing. "" keeps the index in memory only (lost on
	// restart); the configuration's "" is <cache.data_dir>/vectors.
	Path string `toml:"path"`
	// Dimension is the length of every vector. Required (> 0).
	Dimension int
	// EmbedderName is recorded in a new store and compared on open: a store
	// built by another embedder is refused (cache.ErrEmbedderMismatch).
	// "" is a name like any other.
	EmbedderName string
	// MaxEntries bounds the number of entries; past it the entries with the
	// oldest Created are evicted first (not LRU: a hit does not refresh an
	// entry, so an old answer cannot be kept alive forever by popularity).
	// Default 100000 (DefaultMaxEntries). Must be > 0.
	MaxEntries int `toml:"max_entries" zero:"refused"`
	// MaxBytes bounds the memory of the entries (vectors, payloads and a
	// fixed overhead per entry); past it the oldest are evicted, as past
	// MaxEntries. Replay at Open evicts the same way. Default 256 MiB
	// (DefaultMaxBytes). Must be > 0.
	MaxBytes int64 `toml:"max_bytes" unit:"bytes" zero:"refused"`
	// MaxEntryBytes is the largest entry kept (same measure); Upsert skips
	// a larger one. Default 1 MiB (DefaultMaxEntryBytes). Must be > 0.
	MaxEntryBytes int64 `toml:"max_entry_bytes" unit:"bytes" zero:"refused"`
	// FlatLimit is the bucket size up to which search is an exact scan; a
	// bucket that grows past it gets an HNSW graph, dropped again below
	// FlatLimit/2. 0 means 2048 (an exact scan of 2048×512 floats takes
	// about 0.5 ms on a shared 2-core VM, no more than a graph search there,
	// and is always exact; see docs/BENCHMARKS.md).
	FlatLimit int
	// M is the HNSW link count per node (2*M on the bottom layer). 0 means 16.
	M int
	// EfConstruction is the HNSW candidate list size while inserting. 0 means 100.
	EfConstruction int
	// EfSearch is the HNSW candidate list size while searching (at least the
	// query's Limit). 0 means 64.
	EfSearch int
	// SyncEvery is how often the log is fsynced when it has new records.
	// A process crash (kill -9) loses nothing already written; an OS crash
	// or power loss loses at most the last SyncEvery of writes. 0 means 1 s;
	// a negative value fsyncs after every write (slow; for tests and the
	// paranoid).
	SyncEvery time.Duration
	// CompactBytes is the log size that triggers compaction into a new
	// snapshot. The log is also compacted on Close. 0 means 64 MiB.
	CompactBytes int64
	// SweepEvery is how often expired entries are removed (they are never
	// returned in between). 0 means 1 min; negative disables the sweeper
	// (call Sweep yourself).
	SweepEvery time.Duration
	// Logger receives warnings (torn log tails, failed background syncs and
	// compactions). nil means slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Dimension <= 0 {
		return o, fmt.Errorf("open index: dimension %d, want > 0", o.Dimension)
	}
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("open index: %w", err)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxEntries, DefaultMaxEntries)
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxEntryBytes <= 0 {
		o.MaxEntryBytes = DefaultMaxEntryBytes
	}
	def(&o.FlatLimit, 2048)
	def(&o.M, 16)
	def(&o.EfConstruction, 100)
	def(&o.EfSearch, 64)
	if o.M < 2 {
		o.M = 2
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = time.Second
	}
	if o.CompactBytes <= 0 {
		o.CompactBytes = 64 << 20
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Index is the embedded vector index. It is safe for concurrent use.
//
// Locking: writeMu serialises everything that changes the store (Upsert,
// DeletePartition, sweeps, compaction) and the log; mu guards the in-memory
// state between writers (exclusive, held only while applying) and readers
// (Search, Get, Len; shared). Compaction holds only writeMu, so searches run
// while a snapshot is written and writers wait.
type Index struct {
	opts Options

	writeMu sync.Mutex
	wal     *wal // nil when memory-only
	closed  bool // guarded by writeMu and mu (either suffices to read)

	mu sync.RWMutex
	st *state

	hints *hintRing // search neighbourhoods for the inserts that follow (hint.go)

	lock      *os.File
	compactCh chan struct{}
	stop      chan struct{}
	bg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var _ cache.Index = (*Index)(nil)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("index closed")

// Open opens (or creates) the index described by opts. For a store on disk
// it replays the snapshot and the log, truncating a torn log tail left by a
// crash, and refuses a store built by another embedder or dimension.
func Open(opts Options) (*Index, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	x := &Index{opts: o, st: newState(o), hints: newHintRing(), compactCh: make(chan struct{}, 1), stop: make(chan struct{})}
	if o.Path != "" {
		if err := x.openStore(); err != nil {
			if x.wal != nil {
				x.wal.close()
			}
			if x.lock != nil {
				x.lock.Close()
			}
			return nil, err
		}
	}
	x.sweep(time.Now())
	if x.wal != nil {
		x.bg.Go(x.syncLoop)
		x.bg.Go(x.compactLoop)
	}
	if o.SweepEvery > 0 {
		x.bg.Go(x.sweepLoop)
	}
	return x, nil
}

func (x *Index) openStore() error {
	dir := x.opts.Path
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create vector store: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	x.lock = lock
	if err := checkManifest(dir, x.opts); err != nil {
		return err
	}
	snapGen, err := loadSnapshot(dir, x.st, x.opts)
	if err != nil {
		return err
	}
	gens, err := walGens(dir)
	if err != nil {
		return fmt.Errorf("list logs: %w", err)
	}
	last := uint64(0)
	for _, g := range gens {
		path := filepath.Join(dir, walName(g))
		if g < snapGen {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("remove old log: %w", err)
			}
			continue
		}
		if _, err := replayWAL(path, x.opts.Logger, func(p []byte) error { return x.st.apply(p, x.opts) }); err != nil {
			return err
		}
		last = g
	}
	x.st.flush()
	// Grow or drop graphs if FlatLimit changed since the snapshot.
	for _, b := range x.st.buckets {
		switch {
		case b.g == nil && b.live > x.st.flatLimit:
			x.st.buildGraph(b)
		case b.g != nil && b.live < x.st.flatLimit/2:
			b.g = nil
			b.vecs.dropHalf()
		}
	}
	x.st.evict(x.opts)
	if last == 0 {
		x.wal, err = createWAL(dir, max(snapGen, 1))
	} else {
		x.wal, err = openWAL(dir, last)
	}
	return err
}

func (x *Index) checkDim(what string, v []float32) error {
	if len(v) != x.opts.Dimension {
		return fmt.Errorf("%s: vector has %d dimensions, index has %d: %w", what, len(v), x.opts.Dimension, cache.ErrDimension)
	}
	return nil
}

// Upsert implements cache.Index. Vectors are normalised if they are not
// unit length already; Body is copied.
func (x *Index) Upsert(ctx context.Context, items []cache.IndexItem) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	clean := make([]cache.IndexItem, 0, len(items))
	sums := make([]uint64, 0, len(items))
	for _, it := range items {
		if err := x.checkDim("upsert "+it.Entry.Key, it.Vector); err != nil {
			return err
		}
		if it.Entry.Key == "" {
			return errors.New("upsert: empty key")
		}
		if itemBytes(it.Entry, x.opts.Dimension) > x.opts.MaxEntryBytes {
			// Too large to keep: skipped like an entry evicted at once.
			continue
		}
		it.Entry.Body = append([]byte{}, it.Entry.Body...)
		sums = append(sums, x.hints.sum(it.Vector)) // the bits Search saw
		it.Vector = normalize(it.Vector)
		clean = append(clean, it)
	}
	if len(clean) == 0 {
		return nil
	}
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if x.closed {
		return fmt.Errorf("upsert: %w", ErrClosed)
	}
	if err := x.logRecord(encodeUpsert(clean)); err != nil {
		return err
	}
	x.mu.Lock()
	for i, it := range clean {
		stored := x.st.put(it.Entry, it.Vector)
		if g := stored.b.g; g != nil && useHints {
			if cs, ok := x.hints.take(sums[i], g, nil); ok {
				g.hint(stored.slot, cs)
			}
		}
	}
	evicted := x.st.evict(x.opts)
	x.st.flush()
	x.mu.Unlock()
	if len(evicted) > 0 {
		// Replay would evict the same entries; logging them keeps the
		// store right when MaxEntries or MaxBytes grows between runs.
		return x.logRecord(encodeDeleteKeys(evicted))
	}
	return nil
}

// logRecord appends payload to the log, if any. writeMu must be held.
func (x *Index) logRecord(payload []byte) error {
	if x.wal == nil {
		return nil
	}
	if err := x.wal.append(payload, x.opts.SyncEvery < 0); err != nil {
		return err
	}
	if x.wal.size >= x.opts.CompactBytes {
		select {
		case x.compactCh <- struct{}{}:
		default:
		}
	}
	return nil
}

// Search implements cache.Index. Only q's bucket (Partition and Fingerprint)
// is ever looked at.
func (x *Index) Search(ctx context.Context, q cache.SearchQuery) ([]cache.Match, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := x.checkDim("search", q.Vector); err != nil {
		return nil, err
	}
	vec := q.Vector
	if !isUnit(vec) {
		vec = normalize(vec)
	}
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, fmt.Errorf("search: %w", ErrClosed)
	}
	var seen func(*graph, []cand)
	if useHints {
		seen = func(g *graph, cs []cand) { x.hints.put(x.hints.sum(q.Vector), g, cs) }
	}
	return x.st.search(q, vec, now, seen), nil
}

// Get implements cache.Index. The returned Body must not be modified.
func (x *Index) Get(ctx context.Context, key string) (cache.Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return cache.Entry{}, false, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return cache.Entry{}, false, fmt.Errorf("get: %w", ErrClosed)
	}
	it := x.st.byKey[key]
	if it == nil || it.entry.Expired(time.Now()) {
		return cache.Entry{}, false, nil
	}
	return it.entry, true, nil
}

// DeletePartition implements cache.Index.
func (x *Index) DeletePartition(ctx context.Context, partition string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if x.closed {
		return fmt.Errorf("delete partition: %w", ErrClosed)
	}
	if err := x.logRecord(encodeDeletePartition(partition)); err != nil {
		return err
	}
	x.mu.Lock()
	x.st.deletePartition(partition)
	x.mu.Unlock()
	return nil
}

// Len implements cache.Index.
func (x *Index) Len(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return 0, fmt.Errorf("len: %w", ErrClosed)
	}
	return len(x.st.byKey), nil
}

// Sweep removes the entries expired at now and returns how many. Removals
// are not logged: replay drops the same entries, which are expired then too.
func (x *Index) Sweep(now time.Time) int {
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if x.closed {
		return 0
	}
	return x.sweep(now)
}

func (x *Index) sweep(now time.Time) int {
	x.mu.RLock()
	keys := x.st.expired(now)
	x.mu.RUnlock()
	if len(keys) == 0 {
		return 0
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		x.st.deleteKey(k)
	}
	return len(keys)
}

// Compact writes a snapshot of the store and starts a new, empty log. It is
// a no-op for a memory-only index.
func (x *Index) Compact() error {
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if x.closed {
		return fmt.Errorf("compact: %w", ErrClosed)
	}
	return x.compact()
}

// compact rotates the log and snapshots the state. writeMu must be held; no
// writer can change the state meanwhile, and readers only read it.
func (x *Index) compact() error {
	if x.wal == nil {
		return nil
	}
	dir := x.opts.Path
	gen := x.wal.gen + 1
	next, err := createWAL(dir, gen)
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	old := x.wal
	x.wal = next
	if err := old.close(); err != nil {
		x.opts.Logger.Warn("close rotated log", "err", err)
	}
	if err := writeSnapshot(dir, x.st, x.opts, gen); err != nil {
		// Old snapshot plus both logs still describe the store.
		return fmt.Errorf("compact: %w", err)
	}
	gens, err := walGens(dir)
	if err != nil {
		return fmt.Errorf("compact: list logs: %w", err)
	}
	for _, g := range gens {
		if g < gen {
			if err := os.Remove(filepath.Join(dir, walName(g))); err != nil {
				return fmt.Errorf("compact: remove old log: %w", err)
			}
		}
	}
	return nil
}

// Close stops the background work, compacts the log into a snapshot (so the
// next Open need not replay it) and releases the store. Safe to call twice.
func (x *Index) Close() error {
	x.closeOnce.Do(func() {
		close(x.stop)
		x.bg.Wait()
		x.writeMu.Lock()
		defer x.writeMu.Unlock()
		var errs []error
		if x.wal != nil {
			if x.wal.size > int64(len(walMagic)) {
				errs = append(errs, x.compact())
			}
			errs = append(errs, x.wal.close())
		}
		x.mu.Lock()
		x.closed = true
		x.st = newState(x.opts)
		x.mu.Unlock()
		if x.lock != nil {
			errs = append(errs, x.lock.Close())
		}
		x.closeErr = errors.Join(errs...)
	})
	return x.closeErr
}

func (x *Index) syncLoop() {
	if x.opts.SyncEvery < 0 {
		return
	}
	t := time.NewTicker(x.opts.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-x.stop:
			return
		case <-t.C:
			x.writeMu.Lock()
			w := x.wal
			x.writeMu.Unlock()
			// Sync outside writeMu so appends are not held up by the disk.
			// The log may be rotated and closed meanwhile; the rotation
			// synced it already, so an error on a closed file is harmless.
			if w.dirty.Load() {
				if err := w.sync(); err != nil && !errors.Is(err, os.ErrClosed) {
					x.opts.Logger.Warn("sync vector log", "err", err)
				}
			}
		}
	}
}

func (x *Index) compactLoop() {
	for {
		select {
		case <-x.stop:
			return
		case <-x.compactCh:
			if err := x.Compact(); err != nil {
				x.opts.Logger.Warn("compact vector store", "err", err)
			}
		}
	}
}

func (x *Index) sweepLoop() {
	t := time.NewTicker(x.opts.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-x.stop:
			return
		case now := <-t.C:
			x.Sweep(now)
		}
	}
}
