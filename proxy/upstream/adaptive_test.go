package upstream

import (
	"testing"
	"time"
)

func TestAIMDSlowStartThenCut(t *testing.T) {
	a := newAIMD(0)
	if got, want := a.slots(), DefaultInitialLimit; got != want {
		t.Fatalf("initial slots = %d, want %d", got, want)
	}
	// Slow start: one more per answer while the limit is used.
	for range 4 {
		a.answered(100*time.Millisecond, a.slots())
	}
	if got, want := a.limit, float64(DefaultInitialLimit+4); got != want {
		t.Fatalf("limit after 4 answers = %v, want %v", got, want)
	}
	// An idle lane does not grow.
	a.answered(100*time.Millisecond, 1)
	if got, want := a.limit, float64(DefaultInitialLimit+4); got != want {
		t.Errorf("limit after an answer with 1 in flight = %v, want %v (unchanged)", got, want)
	}
	now := time.Now()
	sent := now.Add(-50 * time.Millisecond)
	if !a.refused(sent, now) {
		t.Fatal("first refusal did not cut")
	}
	if got, want := a.limit, 8*backoffRatio; !near(got, want) {
		t.Fatalf("limit after a refusal = %v, want %v", got, want)
	}
	// Refusals of attempts sent before the cut were already accounted for.
	if a.refused(sent, now.Add(time.Millisecond)) {
		t.Error("a refusal of an attempt sent before the cut cut again")
	}
	if !a.refused(now.Add(time.Millisecond), now.Add(2*time.Millisecond)) {
		t.Error("a refusal of an attempt sent after the cut did not cut")
	}
	for i := range 20 {
		at := now.Add(time.Second + time.Duration(i)*time.Millisecond)
		a.refused(at, at)
	}
	if a.limit < minLimit || a.slots() != 1 {
		t.Errorf("limit after many refusals = %v (%d slots), want the floor of 1", a.limit, a.slots())
	}
}

func TestAIMDProbesGentlyThenFaster(t *testing.T) {
	a := newAIMD(0)
	now := time.Now()
	a.limit = 10
	a.refused(now, now) // limit 7
	answers := func(rounds int) float64 {
		before := a.limit
		for range rounds {
			for range a.slots() {
				a.answered(100*time.Millisecond, a.slots())
			}
		}
		return a.limit - before
	}
	first := answers(2)
	if first <= 0 || first > 1 {
		t.Errorf("growth over the first 2 round trips after a cut = %.2f, want gentle (0, 1]", first)
	}
	later := answers(4)
	if later <= first {
		t.Errorf("growth over the next 4 round trips = %.2f, want faster than the first %.2f (a model that came back is found again)", later, first)
	}
	if a.limit > a.ceiling {
		t.Errorf("limit %v above the ceiling %v", a.limit, a.ceiling)
	}
	if r, want := a.rate(), float64(a.slots())/0.1; !near(r, want) {
		t.Errorf("rate = %.1f, want slots ÷ 100ms = %.1f", r, want)
	}
}

func TestAIMDCeiling(t *testing.T) {
	a := newAIMD(3)
	for range 10 {
		a.answered(time.Millisecond, a.slots())
	}
	if got, want := a.slots(), 3; got != want {
		t.Errorf("slots = %d, want the ceiling %d", got, want)
	}
}
