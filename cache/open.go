package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrIndexOpening is what Health reports (wrapped) for ComponentIndex while
// Options.OpenIndex runs. The cache serves meanwhile: the exact tier and
// forwarding work, semantic lookups are misses, answers go to the exact
// tier only.
var ErrIndexOpening = errors.New("index opening")

// errNoIndex is an upsert attempted with no open index (only after Close).
var errNoIndex = errors.New("no open index")

// Index states reported in Stats.IndexState.
const (
	IndexOff     = "off"
	IndexOpening = "opening"
	IndexReady   = "ready"
	IndexFailed  = "failed"
)

// maxPendingFlushes bounds the partitions whose flush waits for the index to
// open; past it they become one flush of everything (forgetting more of a
// cache is always safe, serving a flushed answer is not).
const maxPendingFlushes = 1024

type indexRef struct{ Index }

// opener runs Options.OpenIndex and holds what happened meanwhile.
type opener struct {
	mu      sync.Mutex
	state   string
	started time.Time
	took    time.Duration
	// pending are the partitions flushed while opening ("" in pendingAll):
	// the stored snapshot still holds their entries, so they are deleted
	// before the first search.
	pending    map[string]struct{}
	pendingAll bool
	closed     bool
	owned      Index // the opened index, closed by Cache.Close
	cancel     context.CancelFunc
	done       chan struct{}
}

// startOpen opens the index in the background; c must be complete.
func (c *Cache) startOpen(open func(ctx context.Context) (Index, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	o := &opener{state: IndexOpening, started: time.Now(), pending: map[string]struct{}{}, cancel: cancel, done: make(chan struct{})}
	c.op = o
	go func() {
		defer close(o.done)
		defer cancel()
		ix, err := open(ctx)
		c.opened(ctx, ix, err)
	}()
}

// opened installs the index that OpenIndex returned, after applying the
// flushes asked for meanwhile, or records why there is none.
func (c *Cache) opened(ctx context.Context, ix Index, err error) {
	o := c.op
	o.mu.Lock()
	defer o.mu.Unlock()
	o.took = time.Since(o.started)
	if err == nil && ix == nil {
		err = errors.New("the opener returned no index")
	}
	if err == nil && o.closed {
		_ = ix.Close()
		err = errors.New("cache closed while the index was opening")
	}
	if err == nil {
		err = o.applyPending(ctx, ix)
		if err != nil {
			_ = ix.Close()
		}
	}
	if err != nil {
		o.state = IndexFailed
		if !o.closed {
			c.fail(ComponentIndex, fmt.Errorf("open index: %w", err))
		}
		return
	}
	o.owned, o.state = ix, IndexReady
	c.watchFlushes(ix)
	c.ixp.Store(&indexRef{ix})
	c.log.Info("semantic tier ready", "took", o.took.Round(time.Millisecond).String())
}

func (o *opener) applyPending(ctx context.Context, ix Index) error {
	if o.pendingAll {
		o.pending = map[string]struct{}{"": {}}
	}
	for p := range o.pending {
		if err := ix.DeletePartition(ctx, p); err != nil {
			return fmt.Errorf("apply a flush asked for while opening: %w", err)
		}
	}
	o.pending, o.pendingAll = nil, false
	return nil
}

// deferFlush records a flush of partition for the index to apply when it
// opens, and reports whether it did (false: the index is open, or none is
// coming, and Flush goes on).
func (c *Cache) deferFlush(partition string) bool {
	o := c.op
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state != IndexOpening {
		return false
	}
	switch {
	case partition == "" || len(o.pending) >= maxPendingFlushes:
		o.pendingAll, o.pending = true, map[string]struct{}{}
	case !o.pendingAll:
		o.pending[partition] = struct{}{}
	}
	return true
}

// skipWrite counts an answer kept out of the index because it is opening.
// Queuing it instead would fill the bounded write-back queue within seconds
// of traffic during a load that takes ten, and count the overflow as drops;
// the exact tier serves its repeats meanwhile.
func (c *Cache) skipWrite() {
	o := c.op
	if o == nil {
		return
	}
	o.mu.Lock()
	opening := o.state == IndexOpening
	o.mu.Unlock()
	if opening {
		c.openingSkips.Add(1)
	}
}

// openingHealth adds ComponentIndex to h while the index opens.
func (c *Cache) openingHealth(h map[string]error) {
	o := c.op
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state == IndexOpening {
		h[ComponentIndex] = fmt.Errorf("%w (%s so far): semantic lookups miss until it is open", ErrIndexOpening, time.Since(o.started).Round(100*time.Millisecond))
	}
}

func (c *Cache) openStats(s *Stats) {
	s.IndexState, s.OpeningSkips = IndexOff, c.openingSkips.Load()
	if c.ix() != nil {
		s.IndexState = IndexReady
	}
	o := c.op
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s.IndexState, s.IndexOpenSeconds = o.state, o.took.Seconds()
	if o.state == IndexOpening {
		s.IndexOpenSeconds = time.Since(o.started).Seconds()
	}
}

// closedChan is the Opened of a cache with nothing to open.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Opened is closed once Options.OpenIndex has returned (opened or failed),
// and from the start without it: callers that need the semantic tier from
// their first request (a demo, a benchmark) wait on it.
func (c *Cache) Opened() <-chan struct{} {
	if c.op == nil {
		return closedChan
	}
	return c.op.done
}

// closeOpened stops a running open (waiting for it up to ctx) and closes the
// index it opened.
func (c *Cache) closeOpened(ctx context.Context) {
	o := c.op
	if o == nil {
		return
	}
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	select {
	case <-o.done:
	case <-ctx.Done(): // opened will close it when the open returns
	}
	o.mu.Lock()
	ix := o.owned
	o.owned = nil
	o.mu.Unlock()
	if ix != nil {
		c.ixp.Store(nil)
		if err := ix.Close(); err != nil {
			c.log.Warn("close index", "err", err)
		}
	}
}
