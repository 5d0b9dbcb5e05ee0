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

func TestBreakerConsecutiveFailures(t *testing.T) {
	clk := newFakeClock()
	b := newBreaker(BreakerOptions{ConsecutiveFailures: 3, FailureRatio: -1, OpenFor: 10 * time.Second, HalfOpenProbes: 2}.withDefaults())
	for i := range 2 {
		b.report(clk.now(), notProbe, failure)
		if s, _ := b.snapshot(clk.now()); s != StateClosed {
			t.Fatalf("after %d failures state = %s, want closed", i+1, s)
		}
	}
	b.report(clk.now(), notProbe, success) // resets the run
	b.report(clk.now(), notProbe, failure)
	b.report(clk.now(), notProbe, failure)
	if s, _ := b.snapshot(clk.now()); s != StateClosed {
		t.Fatalf("state = %s after a success broke the run, want closed", s)
	}
	if s, changed := b.report(clk.now(), notProbe, failure); s != StateOpen || !changed {
		t.Fatalf("state = %s (changed %v) after 3 in a row, want open", s, changed)
	}
	if _, ok := b.allow(clk.now()); ok {
		t.Fatal("open breaker admitted an attempt")
	}
	clk.advance(10 * time.Second)
	if !b.peek(clk.now()) {
		t.Fatal("peek after open_for = false, want true")
	}
	// Half-open: exactly HalfOpenProbes probes.
	for i := range 2 {
		if probe, ok := b.allow(clk.now()); !ok || probe != halfOpen {
			t.Fatalf("probe %d: allow = %v, %v; want probe admitted", i+1, probe, ok)
		}
	}
	if _, ok := b.allow(clk.now()); ok {
		t.Fatal("third attempt admitted while half-open with 2 probes")
	}
	// A neutral probe (client error) frees its place.
	b.report(clk.now(), halfOpen, neutral)
	if _, ok := b.allow(clk.now()); !ok {
		t.Fatal("no probe admitted after a neutral one")
	}
	b.report(clk.now(), halfOpen, success)
	if s, _ := b.snapshot(clk.now()); s != StateHalfOpen {
		t.Fatalf("state = %s after 1 of 2 probe successes, want half-open", s)
	}
	if s, _ := b.report(clk.now(), halfOpen, success); s != StateClosed {
		t.Fatalf("state = %s after 2 probe successes, want closed", s)
	}
}

func TestBreakerProbeFailureReopens(t *testing.T) {
	clk := newFakeClock()
	b := newBreaker(BreakerOptions{ConsecutiveFailures: 1, OpenFor: time.Second}.withDefaults())
	b.report(clk.now(), notProbe, failure)
	clk.advance(time.Second)
	probe, ok := b.allow(clk.now())
	if !ok || probe != halfOpen {
		t.Fatalf("allow = %v, %v; want a probe", probe, ok)
	}
	if s, _ := b.report(clk.now(), halfOpen, failure); s != StateOpen {
		t.Fatalf("state = %s after a failed probe, want open", s)
	}
	if _, wait := b.snapshot(clk.now()); wait != time.Second {
		t.Errorf("open for %s, want a fresh 1s", wait)
	}
}

func TestBreakerFailureRatio(t *testing.T) {
	tests := []struct {
		name       string
		ok, failed int
		spread     time.Duration // between outcomes
		wantOpen   bool
	}{
		{"below min requests", 2, 7, 0, false}, // 9 < 10
		{"ratio reached", 5, 5, 0, true},       // 5/10 ≥ 0.5
		{"ratio not reached", 7, 4, 0, false},  // 4/11
		{"old outcomes fall out of the window", 0, 12, 2 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			b := newBreaker(BreakerOptions{Window: 10 * time.Second, MinRequests: 10, FailureRatio: 0.5, ConsecutiveFailures: -1}.withDefaults())
			for range tt.ok {
				b.report(clk.now(), notProbe, success)
			}
			for range tt.failed {
				clk.advance(tt.spread)
				b.report(clk.now(), notProbe, failure)
			}
			s, _ := b.snapshot(clk.now())
			if got, want := s == StateOpen, tt.wantOpen; got != want {
				t.Errorf("open = %v, want %v (state %s)", got, want, s)
			}
		})
	}
}

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
