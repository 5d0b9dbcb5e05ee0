package breaker

import (
	"testing"
	"time"
)

// clock is a time that moves only when told.
type clock struct{ t time.Time }

func newClock() *clock                   { return &clock{t: time.Unix(1_700_000_000, 0)} }
func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestBreakerConsecutiveFailures(t *testing.T) {
	clk := newClock()
	b := New(Options{ConsecutiveFailures: 3, FailureRatio: -1, OpenFor: 10 * time.Second, HalfOpenProbes: 2})
	for i := range 2 {
		b.Report(clk.now(), NotProbe, Failure)
		if s, _ := b.Snapshot(clk.now()); s != StateClosed {
			t.Fatalf("after %d failures state = %s, want closed", i+1, s)
		}
	}
	b.Report(clk.now(), NotProbe, Success) // resets the run
	b.Report(clk.now(), NotProbe, Failure)
	b.Report(clk.now(), NotProbe, Failure)
	if s, _ := b.Snapshot(clk.now()); s != StateClosed {
		t.Fatalf("state = %s after a success broke the run, want closed", s)
	}
	if s, changed := b.Report(clk.now(), NotProbe, Failure); s != StateOpen || !changed {
		t.Fatalf("state = %s (changed %v) after 3 in a row, want open", s, changed)
	}
	if _, ok := b.Allow(clk.now()); ok {
		t.Fatal("open breaker admitted an attempt")
	}
	clk.advance(10 * time.Second)
	if !b.Peek(clk.now()) {
		t.Fatal("peek after open_for = false, want true")
	}
	// Half-open: exactly HalfOpenProbes probes.
	for i := range 2 {
		if probe, ok := b.Allow(clk.now()); !ok || probe != HalfOpen {
			t.Fatalf("probe %d: allow = %v, %v; want probe admitted", i+1, probe, ok)
		}
	}
	if _, ok := b.Allow(clk.now()); ok {
		t.Fatal("third attempt admitted while half-open with 2 probes")
	}
	// A neutral probe (client error) frees its place.
	b.Report(clk.now(), HalfOpen, Neutral)
	if _, ok := b.Allow(clk.now()); !ok {
		t.Fatal("no probe admitted after a neutral one")
	}
	b.Report(clk.now(), HalfOpen, Success)
	if s, _ := b.Snapshot(clk.now()); s != StateHalfOpen {
		t.Fatalf("state = %s after 1 of 2 probe successes, want half-open", s)
	}
	if s, _ := b.Report(clk.now(), HalfOpen, Success); s != StateClosed {
		t.Fatalf("state = %s after 2 probe successes, want closed", s)
	}
}

func TestBreakerProbeFailureReopens(t *testing.T) {
	clk := newClock()
	b := New(Options{ConsecutiveFailures: 1, OpenFor: time.Second})
	b.Report(clk.now(), NotProbe, Failure)
	clk.advance(time.Second)
	probe, ok := b.Allow(clk.now())
	if !ok || probe != HalfOpen {
		t.Fatalf("allow = %v, %v; want a probe", probe, ok)
	}
	if s, _ := b.Report(clk.now(), HalfOpen, Failure); s != StateOpen {
		t.Fatalf("state = %s after a failed probe, want open", s)
	}
	if _, wait := b.Snapshot(clk.now()); wait != time.Second {
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
			clk := newClock()
			b := New(Options{Window: 10 * time.Second, MinRequests: 10, FailureRatio: 0.5, ConsecutiveFailures: -1})
			for range tt.ok {
				b.Report(clk.now(), NotProbe, Success)
			}
			for range tt.failed {
				clk.advance(tt.spread)
				b.Report(clk.now(), NotProbe, Failure)
			}
			s, _ := b.Snapshot(clk.now())
			if got, want := s == StateOpen, tt.wantOpen; got != want {
				t.Errorf("open = %v, want %v (state %s)", got, want, s)
			}
		})
	}
}
