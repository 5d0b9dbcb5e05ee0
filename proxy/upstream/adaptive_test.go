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
	a.refused(now, now) // limit 7, refused at 10
	rounds := func(n int) float64 {
		before := a.limit
		for range n {
			for range a.slots() {
				a.answered(100*time.Millisecond, a.slots())
			}
		}
		return a.limit - before
	}
	// Far below where it was refused: back quickly, about one per round trip.
	if got := rounds(2); got < 1.5 || got > 2.5 {
		t.Errorf("growth over 2 round trips from 7 = %.2f, want about 2", got)
	}
	for a.limit < 9 {
		rounds(1)
	}
	// Just below the refusal point: gently.
	if got := rounds(2); got <= 0 || got > 0.6 {
		t.Errorf("growth over 2 round trips near the refusal point = %.2f, want gentle (0, 0.6]", got)
	}
	for a.limit < 10 {
		rounds(1)
	}
	// Beyond it, faster and faster: the capacity may have come back.
	first := rounds(2)
	later := rounds(4)
	if later <= first {
		t.Errorf("growth beyond the refusal point: %.2f over 4 round trips after %.2f over 2, want faster", later, first)
	}
	if a.limit > a.ceiling {
		t.Errorf("limit %v above the ceiling %v", a.limit, a.ceiling)
	}
	// Answers came faster than 100 ms apart here: the measured completion
	// rate wins over Little's law.
	if r, little := a.rate(), float64(a.slots())/0.1; r <= little {
		t.Errorf("rate = %.1f, want above slots ÷ 100ms = %.1f (answers came back to back)", r, little)
	}
	b := newAIMD(0)
	b.answered(100*time.Millisecond, 1)
	if r, want := b.rate(), float64(b.slots())/0.1; !near(r, want) {
		t.Errorf("rate after one answer = %.1f, want slots ÷ 100ms = %.1f", r, want)
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
