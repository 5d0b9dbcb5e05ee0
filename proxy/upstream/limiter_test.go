package upstream

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPoolQueueAndShed(t *testing.T) {
	p := newPool("openai", "batch", 1, 1, nil)
	ctx := t.Context()
	if err := p.acquire(ctx); err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- p.acquire(ctx) }()
	waitFor(t, func() bool { _, q := p.counts(); return q == 1 })

	start := time.Now()
	err := p.acquire(ctx)
	var shed *shedError
	if !errors.As(err, &shed) || !errors.Is(err, ErrShed) {
		t.Fatalf("third acquire = %v, want a shed error", err)
	}
	// A wrong wait would last until the first slot is released, which
	// never happens here; 1 s only absorbs a busy CI core under -race.
	if d := time.Since(start); d > time.Second {
		t.Errorf("shed took %s, want at once", d)
	}
	if got, want := shed.Error(), "breakwater: the 'batch' queue for upstream openai is full (1 waiting, 1 in flight); retry after 1s or raise the pool's max_queue"; got != want {
		t.Errorf("message = %q\nwant        %q", got, want)
	}
	p.release() // hands the slot to the waiter
	if err := <-got; err != nil {
		t.Fatalf("queued acquire: %v", err)
	}
	if in, q := p.counts(); in != 1 || q != 0 {
		t.Fatalf("counts = %d in flight, %d queued; want 1, 0", in, q)
	}
	p.release()
	if in, _ := p.counts(); in != 0 {
		t.Fatalf("in flight = %d after releases, want 0", in)
	}
}

func TestPoolWaitRespectsContext(t *testing.T) {
	p := newPool("openai", defaultPool, 1, 4, nil)
	if err := p.acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := p.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire = %v, want deadline exceeded", err)
	}
	if in, q := p.counts(); in != 1 || q != 0 {
		t.Fatalf("counts = %d, %d; want the waiter gone", in, q)
	}
}

func TestPoolNoQueue(t *testing.T) {
	p := newPool("openai", defaultPool, 1, 0, nil)
	if err := p.acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.acquire(t.Context()); !errors.Is(err, ErrShed) {
		t.Fatalf("acquire = %v, want shed with no queue", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
