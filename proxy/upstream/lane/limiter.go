package lane

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolShed is returned by Pool.Acquire when the queue is full.
type PoolShed struct {
	Upstream, Pool    string
	Waiting, Inflight int
	hint              string
}

func (e *PoolShed) Error() string {
	return fmt.Sprintf("breakwater: the '%s' queue for upstream %s is full (%d waiting, %d in flight); retry after 1s or raise %s",
		e.Pool, e.Upstream, e.Waiting, e.Inflight, e.hint)
}

func (e *PoolShed) Unwrap() error { return ErrShed }

// DefaultPool is the pool of requests whose class has none of its own.
const DefaultPool = "default"

// Pool is one class's slots and FIFO queue on one upstream. A request holds a
// slot for one attempt, never across backoff waits, so waiting requests get the
// slot while a failed one sleeps.
type Pool struct {
	upstream, name string
	max, maxQueue  int              // max <= 0: unlimited
	gauge          prometheus.Gauge // breakwater_upstream_inflight{upstream}, resolved once; nil: none
	queued         func(n int)      // told the queue's length when it moves; nil: none

	mu       sync.Mutex
	inflight int
	waiters  list.List // of chan struct{}
}

// NewPool makes the pool name of upstream: max slots (<= 0: unlimited) and a
// queue of maxQueue (< 0: none). inflight, when not nil, follows the slots
// taken; queued, when not nil, is told the queue's length when it moves.
func NewPool(upstream, name string, max, maxQueue int, inflight prometheus.Gauge, queued func(n int)) *Pool {
	return &Pool{upstream: upstream, name: name, max: max, maxQueue: max0(maxQueue), gauge: inflight, queued: queued}
}

func max0(n int) int { return max(n, 0) }

// Acquire takes a slot, waiting in the queue when every slot is taken. It fails
// at once with a *PoolShed when the queue is full, and with ctx.Err() when ctx
// ends while waiting.
func (p *Pool) Acquire(ctx context.Context) error {
	p.mu.Lock()
	if p.max <= 0 || (p.inflight < p.max && p.waiters.Len() == 0) {
		p.inflight++
		p.mu.Unlock()
		p.inflightAdd(1)
		return nil
	}
	if p.waiters.Len() >= p.maxQueue {
		err := &PoolShed{Upstream: p.upstream, Pool: p.name, Waiting: p.waiters.Len(), Inflight: p.inflight,
			hint: "upstreams.max_queue"}
		if p.name != DefaultPool {
			err.hint = "the pool's max_queue"
		}
		p.mu.Unlock()
		return err
	}
	ready := make(chan struct{})
	e := p.waiters.PushBack(ready)
	queued := p.waiters.Len()
	p.mu.Unlock()
	p.queuedSet(queued)

	select {
	case <-ready:
		// release handed its slot over: inflight already counts us.
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	select {
	case <-ready:
		// Granted while we were giving up: pass the slot on.
		p.mu.Unlock()
		p.Release()
	default:
		p.waiters.Remove(e)
		queued := p.waiters.Len()
		p.mu.Unlock()
		p.queuedSet(queued)
	}
	return ctx.Err()
}

// Release returns a slot, handing it straight to the longest waiter if any.
func (p *Pool) Release() {
	p.mu.Lock()
	if front := p.waiters.Front(); front != nil && p.max > 0 {
		p.waiters.Remove(front)
		close(front.Value.(chan struct{}))
		queued := p.waiters.Len()
		p.mu.Unlock()
		p.queuedSet(queued)
		return
	}
	p.inflight--
	p.mu.Unlock()
	p.inflightAdd(-1)
}

func (p *Pool) queuedSet(n int) {
	if p.queued != nil {
		p.queued(n)
	}
}

func (p *Pool) inflightAdd(d float64) {
	if p.gauge != nil {
		p.gauge.Add(d)
	}
}

func (p *Pool) Counts() (inflight, queued int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight, p.waiters.Len()
}

// ShedRetryAfter is the wait a shed request is told to take: long enough for a
// queue to drain a little, short enough to keep latency sane.
const ShedRetryAfter = time.Second
