package upstream

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// shedError is returned by pool.acquire when the queue is full.
type shedError struct {
	upstream, pool    string
	waiting, inflight int
	hint              string
}

func (e *shedError) Error() string {
	return fmt.Sprintf("breakwater: the '%s' queue for upstream %s is full (%d waiting, %d in flight); retry after 1s or raise %s",
		e.pool, e.upstream, e.waiting, e.inflight, e.hint)
}

func (e *shedError) Unwrap() error { return ErrShed }

// pool is one class's slots and FIFO queue on one upstream. A request holds a
// slot for one attempt, never across backoff waits, so waiting requests get the
// slot while a failed one sleeps.
type pool struct {
	upstream, name string
	max, maxQueue  int // max <= 0: unlimited
	metrics        *Metrics
	gauge          prometheus.Gauge // breakwater_upstream_inflight{upstream}, resolved once

	mu       sync.Mutex
	inflight int
	waiters  list.List // of chan struct{}
}

func newPool(upstream, name string, max, maxQueue int, m *Metrics) *pool {
	p := &pool{upstream: upstream, name: name, max: max, maxQueue: max0(maxQueue), metrics: m}
	if m != nil {
		// Looked up once: WithLabelValues hashes the labels on every call,
		// and every attempt moves this gauge twice.
		p.gauge = m.inflight.WithLabelValues(upstream)
	}
	return p
}

func max0(n int) int { return max(n, 0) }

// acquire takes a slot, waiting in the queue when every slot is taken. It fails
// at once with a *shedError when the queue is full, and with ctx.Err() when ctx
// ends while waiting.
func (p *pool) acquire(ctx context.Context) error {
	p.mu.Lock()
	if p.max <= 0 || (p.inflight < p.max && p.waiters.Len() == 0) {
		p.inflight++
		p.mu.Unlock()
		p.inflightAdd(1)
		return nil
	}
	if p.waiters.Len() >= p.maxQueue {
		err := &shedError{upstream: p.upstream, pool: p.name, waiting: p.waiters.Len(), inflight: p.inflight,
			hint: "upstreams.max_queue"}
		if p.name != defaultPool {
			err.hint = "the pool's max_queue"
		}
		p.mu.Unlock()
		return err
	}
	ready := make(chan struct{})
	e := p.waiters.PushBack(ready)
	queued := p.waiters.Len()
	p.mu.Unlock()
	p.metrics.queuedSet(p.upstream, p.name, queued)

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
		p.release()
	default:
		p.waiters.Remove(e)
		queued := p.waiters.Len()
		p.mu.Unlock()
		p.metrics.queuedSet(p.upstream, p.name, queued)
	}
	return ctx.Err()
}

// release returns a slot, handing it straight to the longest waiter if any.
func (p *pool) release() {
	p.mu.Lock()
	if front := p.waiters.Front(); front != nil && p.max > 0 {
		p.waiters.Remove(front)
		close(front.Value.(chan struct{}))
		queued := p.waiters.Len()
		p.mu.Unlock()
		p.metrics.queuedSet(p.upstream, p.name, queued)
		return
	}
	p.inflight--
	p.mu.Unlock()
	p.inflightAdd(-1)
}

func (p *pool) inflightAdd(d float64) {
	if p.gauge != nil {
		p.gauge.Add(d)
	}
}

func (p *pool) counts() (inflight, queued int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight, p.waiters.Len()
}

// upstream is one API with its pools.
type upstream struct {
	cfg   Upstream
	pools map[string]*pool
}

func newUpstream(u Upstream, m *Metrics) *upstream {
	if u.MaxConcurrency == 0 {
		u.MaxConcurrency = DefaultMaxConcurrency
	}
	if u.MaxQueue == 0 {
		u.MaxQueue = DefaultMaxQueue
	}
	up := &upstream{cfg: u, pools: make(map[string]*pool, len(u.Pools)+1)}
	up.pools[defaultPool] = newPool(u.Name, defaultPool, u.MaxConcurrency, u.MaxQueue, m)
	for name, l := range u.Pools {
		conc, queue := l.MaxConcurrency, l.MaxQueue
		if conc == 0 {
			conc = u.MaxConcurrency
		}
		if queue == 0 {
			queue = u.MaxQueue
		}
		up.pools[name] = newPool(u.Name, name, conc, queue, m)
	}
	return up
}

// pool returns the class's pool; unknown classes share the default pool so that
// clients cannot mint metric labels.
func (u *upstream) pool(class string) *pool {
	if p, ok := u.pools[class]; ok {
		return p
	}
	return u.pools[defaultPool]
}

// shedRetryAfter is the wait a shed request is told to take: long enough for a
// queue to drain a little, short enough to keep latency sane.
const shedRetryAfter = time.Second
