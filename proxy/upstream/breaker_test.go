package upstream

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is an Options.Now that moves only when told; safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func TestWeightDecayAndRecovery(t *testing.T) {
	tg := &target{factor: 1}
	if got, want := tg.adjust(failure), 0.7; !near(got, want) {
		t.Fatalf("after 1 failure factor = %v, want %v", got, want)
	}
	if got, want := tg.adjust(failure), 0.49; !near(got, want) {
		t.Fatalf("after 2 failures factor = %v, want %v", got, want)
	}
	for range 20 {
		tg.adjust(failure)
	}
	if got, want := tg.weightFactor(), weightFloor; !near(got, want) {
		t.Fatalf("after many failures factor = %v, want floor %v", got, want)
	}
	if got, want := tg.adjust(success), weightFloor+(1-weightFloor)*weightRecovery; !near(got, want) {
		t.Fatalf("after 1 success factor = %v, want %v", got, want)
	}
	if got := tg.adjust(neutral); !near(got, weightFloor+(1-weightFloor)*weightRecovery) {
		t.Fatalf("neutral moved the factor to %v", got)
	}
	for range 100 {
		tg.adjust(success)
	}
	if got, want := tg.weightFactor(), 1.0; got != want {
		t.Fatalf("after recovery factor = %v, want %v", got, want)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
