package flow

import (
	"context"
	"errors"
	"io"
	"sync"

	"golang.org/x/sync/singleflight"
)

// flights coalesces identical misses in flight (same exact key) into one
// upstream call. singleflight alone would tie the shared call to the first
// caller's context, so a leader whose client hangs up would fail everybody;
// here the shared call runs on its own context, cancelled only when every
// waiter has gone (client cancellation stops everything at once: once nobody
// waits, nothing keeps running).
type flights struct {
	group singleflight.Group
	mu    sync.Mutex
	live  map[string]*flight
}

type flight struct {
	waiters int
	ctx     context.Context
	cancel  context.CancelFunc
}

func newFlights() *flights { return &flights{live: map[string]*flight{}} }

// do runs fn once for all concurrent callers with the same key. shared is
// true for callers that received another caller's result.
//
// An answer longer than the caller's MaxAnswerBytes (Response.Rest set) is
// read as it arrives, so it cannot be shared: the caller whose function ran
// gets it, and the flight's context lives until its Rest is closed; the
// others get errNotShared and must call on their own.
func (f *flights) do(ctx context.Context, key string, fn func(ctx context.Context) (*called, error)) (resp *called, shared bool, err error) {
	// singleflight's Shared is true for the leader as well once anybody
	// joined; what matters here is whether this caller's function ran.
	ran := false
	fl, ch := f.join(ctx, key, func(fl *flight) <-chan singleflight.Result {
		return f.group.DoChan(key, func() (any, error) {
			ran = true
			return fn(fl.ctx)
		})
	})
	leave := true
	defer func() {
		if leave {
			f.leave(key, fl)
		}
	}()
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, !ran, r.Err
		}
		resp := r.Val.(*called)
		if resp.Rest != nil {
			if !ran {
				return nil, false, errNotShared
			}
			leave = false
			cp := *resp.Response
			cp.Rest = &leaveOnClose{ReadCloser: resp.Rest, leave: func() { f.leave(key, fl) }}
			return &called{Response: &cp, usage: resp.usage}, false, nil
		}
		return resp, !ran, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// errNotShared tells a coalesced caller that the answer it waited for cannot
// be shared (it is relayed as it arrives) and that it must call on its own.
var errNotShared = errors.New("the answer is too long to share")

// leaveOnClose ends a flight's hold when the relayed answer is closed.
type leaveOnClose struct {
	io.ReadCloser
	once  sync.Once
	leave func()
}

func (l *leaveOnClose) Close() error {
	err := l.ReadCloser.Close()
	l.once.Do(l.leave)
	return err
}

// join counts the caller as a waiter of key's flight and enters the shared
// call in one step under mu (DoChan does not block: the call runs in its own
// goroutine), so every counted waiter is inside the call. Counted first and
// entered later, a waiter delayed in between could miss the call that ends
// meanwhile and start a second one.
func (f *flights) join(ctx context.Context, key string, enter func(*flight) <-chan singleflight.Result) (*flight, <-chan singleflight.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.live[key]
	if !ok {
		// The shared call keeps the first caller's values (request ID,
		// logger) and deadline, but not its cancellation.
		base := context.WithoutCancel(ctx)
		var cctx context.Context
		var cancel context.CancelFunc
		if dl, ok := ctx.Deadline(); ok {
			cctx, cancel = context.WithDeadline(base, dl)
		} else {
			cctx, cancel = context.WithCancel(base)
		}
		fl = &flight{ctx: cctx, cancel: cancel}
		f.live[key] = fl
	}
	fl.waiters++
	return fl, enter(fl)
}

func (f *flights) leave(key string, fl *flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl.waiters--
	if fl.waiters == 0 {
		fl.cancel()
		if f.live[key] == fl {
			delete(f.live, key)
		}
		// A new caller after this point must start a new flight rather
		// than join the cancelled one.
		f.group.Forget(key)
	}
}
