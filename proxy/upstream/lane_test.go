package upstream

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"
)

func testLane(t *testing.T, limit float64) *lane {
	t.Helper()
	c := newCaller(t, oneTarget("http://127.0.0.1:1/v1"))
	tg := c.routes["gpt-4o"].flat[0].t
	l := tg.laneFor("")
	l.lim.limit = limit
	l.lim.cut, l.lim.refusedAt = true, limit // past its cold start: limit is what it learnt
	l.tokens = float64(l.lim.slots())        // a bucket filled at that limit
	c.rand = func() float64 { return 0.5 }   // a fixed phase after a hold: the tests time sends
	// A crowd: more requests on the lane than a lone one holds (the
	// caller counts them; these tests drive the lane directly). The lone
	// lane's tests set present themselves.
	l.present = loneMax + 1
	return l
}

// TestLaneQueuesInClassOrder: with the one slot taken, waiters are served
// retries first, then realtime, then default, then batch, each first come
// first served.
func TestLaneQueuesInClassOrder(t *testing.T) {
	l := testLane(t, 1)
	deadline := time.Now().Add(time.Minute)
	if err := l.acquire(t.Context(), classRank("", false), false, true, deadline); err != nil {
		t.Fatal(err)
	}
	arrivals := []struct {
		name  string
		class string
		retry bool
	}{{"batch-1", "batch", false}, {"default-1", "", false}, {"realtime-1", "realtime", false},
		{"default-2", "", false}, {"retry-1", "", true}, {"batch-2", "batch", false}}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, a := range arrivals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.acquire(context.Background(), classRank(a.class, a.retry), a.retry, true, deadline); err != nil {
				t.Errorf("%s: %v", a.name, err)
				return
			}
			mu.Lock()
			order = append(order, a.name)
			mu.Unlock()
			l.release()
		}()
		waitUntil(t, func() bool { return l.t.stats.queued.Load() == int64(i+1) })
	}
	l.release()
	wg.Wait()
	want := []string{"retry-1", "realtime-1", "default-1", "default-2", "batch-1", "batch-2"}
	if len(order) != len(want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order = %v, want %v", order, want)
		}
	}
}

// TestLaneShedsWhenTheWaitWouldNotFit: the expected wait (queue ahead ÷
// measured rate) beyond the time left gets 429 at once, with that wait as
// Retry-After; a waiter that can no longer get an answer in time leaves with
// a 429 too, never a timeout.
func TestLaneShedsWhenTheWaitWouldNotFit(t *testing.T) {
	l := testLane(t, 1)
	l.lim.serviceE = 1 // 1 s per answer: 1 answer/s with one slot
	if err := l.acquire(t.Context(), 2, false, true, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Three waiters with plenty of time.
	for i := range 3 {
		go l.acquire(context.Background(), 2, false, true, time.Now().Add(time.Minute))
		waitUntil(t, func() bool { return l.t.stats.queued.Load() == int64(i+1) })
	}
	start := time.Now()
	err := l.acquire(t.Context(), 2, false, true, time.Now().Add(2*time.Second))
	var shed *laneShed
	if !errors.As(err, &shed) || shed.reason != ShedWaitBeyond || !errors.Is(err, ErrShed) {
		t.Fatalf("acquire = %v, want a wait_beyond_deadline shed", err)
	}
	// A shed decided up front returns long before the 2 s deadline; one
	// that waited in the queue would take the whole 2 s (and carry
	// queue_timeout, caught above). 1.5 s leaves room for a busy CI core.
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("shed after %s, want at once (well before the 2s deadline)", d)
	}
	if shed.retryAfter < 4*time.Second || shed.retryAfter > 5*time.Second {
		t.Errorf("retry after = %s, want the expected wait of 4 answers at 1/s", shed.retryAfter)
	}

	// A realtime request waits only behind realtime ones: it fits.
	l.lim.serviceE = 0.05
	done := make(chan error, 1)
	go func() { done <- l.acquire(context.Background(), 1, false, true, time.Now().Add(300*time.Millisecond)) }()
	// Nobody releases: it must leave the queue before its deadline with a shed.
	select {
	case err := <-done:
		if !errors.As(err, &shed) || shed.reason != ShedQueueTimeout {
			t.Errorf("queued acquire = %v, want a queue_timeout shed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter stayed queued past its deadline")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLaneKey(t *testing.T) {
	held := Upstream{APIKey: "sk-sidecar"}
	fwd := Upstream{}
	a := http.Header{"Authorization": {"Bearer sk-a"}}
	b := http.Header{"Authorization": {"Bearer sk-b"}}
	anth := http.Header{"X-Api-Key": {"sk-ant"}}
	if laneKey(a, held) != "" {
		t.Error("a held key must give the target's common lane")
	}
	ka, kb, kc := laneKey(a, fwd), laneKey(b, fwd), laneKey(anth, fwd)
	if ka == "" || ka == kb || kc == "" || kc == ka {
		t.Errorf("lane keys %q %q %q: want distinct, non-empty", ka, kb, kc)
	}
	if ka != laneKey(a.Clone(), fwd) {
		t.Error("the same key gave two lanes")
	}
	for _, k := range []string{ka, kb, kc} {
		if len(k) != 16 {
			t.Errorf("lane key %q: want a 16-hex-digit hash, never the key", k)
		}
	}
}

func TestClientTimeout(t *testing.T) {
	for _, name := range deadlineHeaders {
		for _, tt := range []struct {
			v    string
			want time.Duration
		}{{"", math.MaxInt64}, {"600", 570 * time.Second}, {"2.5", 2375 * time.Millisecond}, {"0.1", time.Second},
			{"-1", math.MaxInt64}, {"soon", math.MaxInt64}, {"NaN", math.MaxInt64}, {"8s", 7600 * time.Millisecond},
			{"1m", 57 * time.Second}, {"-8s", math.MaxInt64}, {"100000", math.MaxInt64}} {
			h := http.Header{}
			if tt.v != "" {
				h.Set(name, tt.v)
			}
			if got := clientTimeout(h); got != tt.want {
				t.Errorf("clientTimeout(%s: %q) = %s, want %s", name, tt.v, got, tt.want)
			}
		}
	}
	// The earliest deadline a client states wins.
	h := http.Header{"X-Stainless-Timeout": {"600"}, "X-Stainless-Read-Timeout": {"20"}, "X-Breakwater-Timeout": {"40s"}}
	if got, want := clientTimeout(h), 19*time.Second; got != want {
		t.Errorf("clientTimeout(600, 20, 40s) = %s, want the earliest less 5%% = %s", got, want)
	}
}
