package embed

import (
	"runtime"
	"sync"
)

// batcher lets concurrent Embed calls share encoder passes. Each call queues
// its texts and, while fewer than GOMAXPROCS passes run, runs passes itself:
// a pass takes every queued text that fits maxBatchRows, whoever queued it.
// Under load one pass serves many callers, so each weight panel is streamed
// once per batch instead of once per text; a lone caller runs its own text
// at once, with no added wait.
type batcher struct {
	model   *useModel
	scratch *sync.Pool

	mu      sync.Mutex
	queue   []*batchJob
	running int // passes running or handed over
}

// batchJob is one text of a call.
type batchJob struct {
	ids  []int32
	dst  []float32
	call *batchCall
}

// batchCall is one Embed call waiting for its texts.
type batchCall struct {
	left int           // texts not yet encoded; guarded by batcher.mu
	done chan struct{} // closed when left reaches 0
	lead chan struct{} // a token: run passes for others (buffered, 1)
}

// run encodes every job of one call and returns when all are written.
func (b *batcher) run(jobs []*batchJob) {
	c := &batchCall{left: len(jobs), done: make(chan struct{}), lead: make(chan struct{}, 1)}
	rows := 0
	for _, j := range jobs {
		j.call = c
		rows += len(j.ids)
	}
	limit := runtime.GOMAXPROCS(0)
	b.mu.Lock()
	b.queue = append(b.queue, jobs...)
	lead := b.running < limit
	if lead {
		b.running++
	}
	// A large call spreads over the idle processors as the per-text
	// workers did: helpers run passes until the queue is empty.
	for helpers := (rows+maxBatchRows-1)/maxBatchRows - 1; helpers > 0 && b.running < limit; helpers-- {
		b.running++
		go b.passes(nil)
	}
	b.mu.Unlock()
	if lead {
		b.passes(c)
	}
	for {
		select {
		case <-c.lead:
			b.passes(c)
		case <-c.done:
			// A token may have arrived with the last text: pass it on.
			select {
			case <-c.lead:
				b.passes(c)
			default:
			}
			return
		}
	}
}

// passes runs encoder passes until the queue is empty or, for a caller (c
// non-nil), its own texts are done; then it hands its turn to the oldest
// waiting call so that no caller keeps serving others indefinitely.
func (b *batcher) passes(c *batchCall) {
	s := b.scratch.Get().(*scratch)
	defer b.scratch.Put(s)
	var (
		texts [][]int32
		dsts  [][]float32
		batch []*batchJob
	)
	b.mu.Lock()
	for {
		if len(b.queue) == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		if c != nil && c.left == 0 {
			select {
			case b.queue[0].call.lead <- struct{}{}: // the turn moves on
			default: // that call holds a token already
				b.running--
			}
			b.mu.Unlock()
			return
		}
		rows, k := 0, 0
		for k < len(b.queue) && (k == 0 || rows+len(b.queue[k].ids) <= maxBatchRows) {
			rows += len(b.queue[k].ids)
			k++
		}
		batch = append(batch[:0], b.queue[:k]...)
		b.queue = b.queue[k:]
		if len(b.queue) == 0 {
			b.queue = nil // let the backing array go
		}
		b.mu.Unlock()

		texts, dsts = texts[:0], dsts[:0]
		for _, j := range batch {
			texts = append(texts, j.ids)
			dsts = append(dsts, j.dst)
		}
		b.model.forwardBatch(texts, s, dsts)

		b.mu.Lock()
		for _, j := range batch {
			if j.call.left--; j.call.left == 0 {
				close(j.call.done)
			}
		}
		clear(batch)
	}
}
