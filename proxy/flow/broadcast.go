package flow

import (
	"context"
	"net/http"
	"sync"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// broadcast fans one upstream stream out to every client that asked the same
// question while it was in flight: followers receive each event as it
// arrives, not after the stream ends (issue "Streaming": coalescing).
type broadcast struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	started  bool
	status   int
	header   http.Header
	target   string
	attempts int
	tried    *upstream.Tried
	events   [][]byte // raw SSE bytes, or the whole body of a non-200
	size     int64    // bytes in events (bounded by the pump: MaxStreamBytes)
	finished bool
	err      error // set before start: the stream could not be opened
	waiters  int
	cancel   context.CancelFunc
	// usage and model are the finished stream's (set before finished), what
	// each follower counts as saved.
	usage Usage
	model string
}

func newBroadcast(cancel context.CancelFunc) *broadcast {
	return &broadcast{changed: make(chan struct{}), cancel: cancel}
}

func (b *broadcast) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *broadcast) start(status int, h http.Header, target string, attempts int, tried *upstream.Tried) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.started, b.status, b.header, b.target, b.attempts, b.tried = true, status, h, target, attempts, tried
	b.notifyLocked()
}

func (b *broadcast) append(ev []byte) {
	cp := append([]byte(nil), ev...)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, cp)
	b.size += int64(len(cp))
	b.notifyLocked()
}

// bytes is the size of every event appended so far.
func (b *broadcast) bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size
}

func (b *broadcast) finish(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started && err != nil {
		b.err = err
	}
	b.finished = true
	b.notifyLocked()
}

// finishUsage ends a clean stream whose answer reported u, from model.
func (b *broadcast) finishUsage(u Usage, model string) {
	b.mu.Lock()
	b.usage, b.model = u, model
	b.mu.Unlock()
	b.finish(nil)
}

// listeners is the number of clients still relaying the stream (the
// leader's and its coalesced followers').
func (b *broadcast) listeners() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.waiters, 1)
}

// usageOf is the usage of a finished stream (zero before it finished).
func (b *broadcast) usageOf() (Usage, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usage, b.model
}

// waitStart blocks until the stream started or failed to.
func (b *broadcast) waitStart(ctx context.Context) error {
	for {
		b.mu.Lock()
		started, err, ch := b.started, b.err, b.changed
		b.mu.Unlock()
		if started {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// read returns the events from index i on, blocking until there is at least
// one or the stream is finished (more == false).
func (b *broadcast) read(ctx context.Context, i int) (evs [][]byte, more bool, err error) {
	for {
		b.mu.Lock()
		evs, fin, ch := b.events[i:], b.finished, b.changed
		b.mu.Unlock()
		if len(evs) > 0 {
			return evs, true, nil
		}
		if fin {
			return nil, false, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// streamFlights maps exact keys to the broadcast of their stream in flight.
type streamFlights struct {
	mu   sync.Mutex
	live map[string]*broadcast
}

func newStreamFlights() *streamFlights { return &streamFlights{live: map[string]*broadcast{}} }

// join returns the broadcast for key and whether the caller leads it (must
// start the pump). The pump's context ends when the last waiter leaves.
func (f *streamFlights) join(ctx context.Context, key string) (b *broadcast, pctx context.Context, leader bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.live[key]; ok {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.waiters++
		return b, nil, false
	}
	base := context.WithoutCancel(ctx)
	var cancel context.CancelFunc
	if dl, ok := ctx.Deadline(); ok {
		pctx, cancel = context.WithDeadline(base, dl)
	} else {
		pctx, cancel = context.WithCancel(base)
	}
	b = newBroadcast(cancel)
	b.waiters = 1
	f.live[key] = b
	return b, pctx, true
}

func (f *streamFlights) leave(key string, b *broadcast) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b.mu.Lock()
	b.waiters--
	last := b.waiters == 0
	b.mu.Unlock()
	if last {
		// Nobody listens any more: stop the upstream stream too. A stream
		// that finished has nothing left to cancel.
		b.cancel()
		if f.live[key] == b {
			delete(f.live, key)
		}
	}
}

// done removes a finished broadcast so later requests start fresh (they
// will hit the cache if the stream was stored).
func (f *streamFlights) done(key string, b *broadcast) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live[key] == b {
		delete(f.live, key)
	}
}
