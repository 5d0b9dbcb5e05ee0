package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxBatch bounds how many queued writes share one Embed and one Upsert.
	maxBatch = 64
	// batchTimeout bounds one batch, so a hung embedder or index stalls the
	// queue (which then drops) rather than the worker forever.
	batchTimeout = 30 * time.Second
)

type queueItem struct {
	e Entry
	// vec is the query's embedding from the lookup, or nil: writeBatch
	// embeds only the items without one.
	vec []float32
	// gen is the cache's flush generation when the write was queued.
	gen uint64
}

// queue is the bounded asynchronous index-write queue: a buffered channel
// drained by one worker that batches what has piled up.
type queue struct {
	ch    chan queueItem
	write func(ctx context.Context, batch []queueItem)

	mu     sync.RWMutex // guards closed against push racing close(ch)
	closed bool

	drops  atomic.Uint64
	bytes  atomic.Int64    // size of the queued entries
	max    int64           // bound on bytes; negative: none
	ctx    context.Context // cancelled when Close runs out of time
	cancel context.CancelFunc
	done   chan struct{}
}

func newQueue(size int, maxBytes int64, write func(context.Context, []queueItem)) *queue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &queue{
		max:    maxBytes,
		ch:     make(chan queueItem, size),
		write:  write,
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go q.run()
	return q
}

// push queues it without ever blocking; a full or closed queue drops it.
func (q *queue) push(it queueItem) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	n := it.size()
	if !q.closed && (q.max < 0 || q.bytes.Add(n) <= q.max) {
		select {
		case q.ch <- it:
			return true
		default:
		}
	}
	if q.max >= 0 && !q.closed {
		q.bytes.Add(-n)
	}
	q.drops.Add(1)
	return false
}

// size is what an item counts against the queue's byte bound.
func (it queueItem) size() int64 {
	e := &it.e
	return int64(len(e.Key) + len(e.Partition) + len(e.Fingerprint) + len(e.Query) + len(e.Model) + len(e.Body) + 4*len(it.vec))
}

// taken releases the bytes of items the worker has taken off the queue.
func (q *queue) taken(batch []queueItem) {
	if q.max < 0 {
		return
	}
	var n int64
	for _, it := range batch {
		n += it.size()
	}
	q.bytes.Add(-n)
}

func (q *queue) depth() int { return len(q.ch) }

func (q *queue) run() {
	defer close(q.done)
	batch := make([]queueItem, 0, maxBatch)
	for it := range q.ch {
		batch = append(batch[:0], it)
	fill:
		for len(batch) < maxBatch {
			select {
			case it, ok := <-q.ch:
				if !ok {
					break fill
				}
				batch = append(batch, it)
			default:
				break fill
			}
		}
		q.taken(batch)
		if q.ctx.Err() != nil {
			// Close gave up waiting: drain without calling out.
			q.drops.Add(uint64(len(batch)))
			continue
		}
		q.write(q.ctx, batch)
	}
}

// close stops accepting writes and waits, bounded by ctx, for the queued ones
// to be written. When ctx ends first the remaining writes are abandoned
// (counted as drops) and a write in flight is cancelled.
func (q *queue) close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		q.cancel()
		return nil
	case <-ctx.Done():
		q.cancel()
		return fmt.Errorf("flush index writes: %w", ctx.Err())
	}
}

// writeBatch embeds the queries of batch in one call and upserts them in one
// call. Failures are counted and reported by Health; the entries stay in the
// exact tier.
func (c *Cache) writeBatch(ctx context.Context, batch []queueItem) {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	now := c.now()
	live := make([]queueItem, 0, len(batch))
	for _, it := range batch {
		if !it.e.Expired(now) && !c.stale(it.e.Partition, it.gen) {
			live = append(live, it)
		}
	}
	if len(live) == 0 {
		return
	}
	// The lookup's vector is reused: embedding the query again would cost a
	// second encoder pass per semantic miss whenever the embedding cache
	// (bounded, and whose admission policy refuses texts seen once when it
	// is full) no longer holds it.
	vecs := make([][]float32, len(live))
	var texts []string
	var need []int
	for i, it := range live {
		if it.vec != nil {
			vecs[i] = it.vec
			continue
		}
		texts = append(texts, it.e.Query)
		need = append(need, i)
	}
	if len(texts) > 0 {
		got, err := c.embedder.Embed(ctx, texts)
		if err == nil && len(got) != len(texts) {
			err = fmt.Errorf("embedder returned %d vectors for %d texts", len(got), len(texts))
		}
		if err == nil {
			for _, v := range got {
				if len(v) != c.embedder.Dimension() {
					err = fmt.Errorf("embedder returned a vector of dimension %d, want %d", len(v), c.embedder.Dimension())
					break
				}
			}
		}
		if err != nil {
			c.writeFailures.Add(uint64(len(texts)))
			c.embedErrors.Add(1)
			c.fail(ComponentEmbedder, fmt.Errorf("embed queries: %w", err))
			// The items that came with their vector are still written.
			if vecs, live = keepEmbedded(vecs, live); len(live) == 0 {
				return
			}
		} else {
			c.ok(ComponentEmbedder)
			for j, i := range need {
				vecs[i] = got[j]
			}
		}
	}

	batchItems := make([]retryItem, len(live))
	for i, it := range live {
		batchItems[i] = retryItem{item: IndexItem{Entry: it.e, Vector: vecs[i]}, gen: it.gen}
	}
	if err := c.upsert(ctx, batchItems); err != nil {
		c.writeFailures.Add(uint64(len(batchItems)))
	}
}

// retryItem is an embedded entry on its way to the index.
type retryItem struct {
	item IndexItem
	gen  uint64
}

// upsert writes items that no flush overtook. A failure marks
// ComponentIndexWrites degraded and keeps the batch for Recheck; a success
// clears it.
func (c *Cache) upsert(ctx context.Context, batch []retryItem) error {
	// Holding writeMu from the staleness check through Upsert means a Flush
	// either sees this upsert (and deletes it after) or is seen by it.
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	items := make([]IndexItem, 0, len(batch))
	kept := batch[:0:0]
	for _, it := range batch {
		if !c.stale(it.item.Entry.Partition, it.gen) {
			items = append(items, it.item)
			kept = append(kept, it)
		}
	}
	if len(items) == 0 {
		return nil
	}
	index := c.ix()
	if index == nil {
		return errNoIndex
	}
	if err := index.Upsert(ctx, items); err != nil {
		if ctx.Err() != nil && c.q.ctx.Err() != nil {
			return err // shutting down: no index fault
		}
		c.indexWriteErrors.Add(1)
		c.retryMu.Lock()
		c.retry = kept
		c.retryMu.Unlock()
		c.fail(ComponentIndexWrites, fmt.Errorf("upsert index: %w", err))
		return err
	}
	c.retryMu.Lock()
	c.retry = nil
	c.retryMu.Unlock()
	c.ok(ComponentIndexWrites)
	return nil
}

// retryWrites upserts the last failed batch again. Expired entries are left
// out; with none left, nothing proves writes work and the failure stays.
func (c *Cache) retryWrites(ctx context.Context) {
	c.retryMu.Lock()
	batch := c.retry
	c.retryMu.Unlock()
	now := c.now()
	live := make([]retryItem, 0, len(batch))
	for _, it := range batch {
		if !it.item.Entry.Expired(now) {
			live = append(live, it)
		}
	}
	if len(live) > 0 {
		_ = c.upsert(ctx, live)
	}
}

// keepEmbedded keeps the items that have a vector.
func keepEmbedded(vecs [][]float32, live []queueItem) ([][]float32, []queueItem) {
	n := 0
	for i := range live {
		if vecs[i] != nil {
			vecs[n], live[n] = vecs[i], live[i]
			n++
		}
	}
	return vecs[:n], live[:n]
}
