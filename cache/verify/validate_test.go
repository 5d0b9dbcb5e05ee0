package verify

import (
	"testing"
	"time"
)

// TestOptionsValidateNamesTheKey: a negative bound is refused naming its
// [cache.verify] key, by Validate and by New; zero (the default) is valid.
func TestOptionsValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		o    Options
		want string
	}{
		{Options{MinSimilarity: -1}, `cache.verify.min_similarity = -1: must be in (0, 1]`},
		{Options{MinSimilarity: 1.5}, `cache.verify.min_similarity = 1.5: must be in (0, 1]`},
		{Options{Candidates: -1}, `cache.verify.candidates = -1: must be >= 1`},
		{Options{Timeout: -time.Second}, `cache.verify.timeout = -1s: must be > 0`},
		{Options{Concurrency: -1}, `cache.verify.concurrency = -1: must be >= 1`},
	}
	for _, tt := range tests {
		if err := tt.o.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
		if v, err := New(tt.o); err == nil {
			v.Close()
			t.Errorf("New(%+v) accepted it", tt.o)
		}
	}
	if err := (Options{SlotWait: -1}).Validate(); err != nil {
		t.Errorf("Validate() of zero fields = %v, want nil", err)
	}
}
