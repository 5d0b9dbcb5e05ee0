package lane

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPoolQueueAndShed(t *testing.T) {
	p := NewPool("openai", "batch", 1, 1, nil, nil)
	ctx := t.Context()
	if err := p.Acquire(ctx); err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- p.Acquire(ctx) }()
	waitUntil(t, func() bool { _, q := p.Counts(); return q == 1 })

	start := time.Now()
	err := p.Acquire(ctx)
	var shed *PoolShed
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
	p.Release() // hands the slot to the waiter
	if err := <-got; err != nil {
		t.Fatalf("queued acquire: %v", err)
	}
	if in, q := p.Counts(); in != 1 || q != 0 {
		t.Fatalf("counts = %d in flight, %d queued; want 1, 0", in, q)
	}
	p.Release()
	if in, _ := p.Counts(); in != 0 {
		t.Fatalf("in flight = %d after releases, want 0", in)
	}
}

func TestPoolWaitRespectsContext(t *testing.T) {
	p := NewPool("openai", DefaultPool, 1, 4, nil, nil)
	if err := p.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := p.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire = %v, want deadline exceeded", err)
	}
	if in, q := p.Counts(); in != 1 || q != 0 {
		t.Fatalf("counts = %d, %d; want the waiter gone", in, q)
	}
}

func TestPoolNoQueue(t *testing.T) {
	p := NewPool("openai", DefaultPool, 1, 0, nil, nil)
	if err := p.Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Acquire(t.Context()); !errors.Is(err, ErrShed) {
		t.Fatalf("acquire = %v, want shed with no queue", err)
	}
}
