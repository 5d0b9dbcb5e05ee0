package setting

import (
	"math"
	"testing"
	"time"
)

func TestRangeHelpers(t *testing.T) {
	var es Errors
	Negative(&es, "a", 0, "must be >= 1")
	Negative(&es, "b", time.Duration(-1), "must be > 0")
	Outside(&es, "c", 1.0, 0, 1, "must be in (0, 1]")
	Outside(&es, "d", float32(1.5), 0, 1, "must be in (0, 1]")
	Outside(&es, "e", math.NaN(), 0, 1, "must be in (0, 1]")
	Outside(&es, "f", -0.5, 0, 2, "must be in [0, 2]")
	want := []string{"b = -1ns: must be > 0", "d = 1.5: must be in (0, 1]", "e = NaN: must be in (0, 1]", "f = -0.5: must be in [0, 2]"}
	got := List(es.Err())
	if len(got) != len(want) {
		t.Fatalf("problems = %v, want %q", got, want)
	}
	for i := range want {
		if got[i].Error() != want[i] {
			t.Errorf("problem %d = %q, want %q", i, got[i], want[i])
		}
	}
}
