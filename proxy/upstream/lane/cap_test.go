package lane

import (
	"testing"
	"time"
)

// A lane under the fleet's capacity gate meets no refusal, and grows with
// every answer; capped at its share, it stays there (a counted level: no
// growth with answers before countedProbeWait), which is where it goes on
// from without the gate. A lane in slow start below the cap is left to it.
func TestCapHoldsTheLimitAtTheShare(t *testing.T) {
	now := time.Now()
	a := newAIMD(0)
	for range 3 {
		a.answered(100*time.Millisecond, a.slots(), 0, now)
	}
	if a.capAt(8) || a.cut || a.limit != 4 {
		t.Fatalf("slow start at %v (cut %v) capped at 8: want it left to slow start at 4", a.limit, a.cut)
	}
	for range 30 {
		a.answered(100*time.Millisecond, a.slots(), 0, now) // slow start, as under the gate: 34
	}
	if !a.capAt(2) || a.limit != 2 || a.slots() != 2 {
		t.Fatalf("limit %v (%d slots) after the cap at 2; want 2", a.limit, a.slots())
	}
	for i := range 20 {
		a.answered(100*time.Millisecond, 2, 0, now.Add(time.Duration(i)*100*time.Millisecond))
	}
	if a.limit != 2 {
		t.Errorf("limit %v after 2 s of busy answers at the cap; want it held at 2 until the probe wait", a.limit)
	}
}
