package embedded

import "testing"

// TestOptionsValidateNamesTheKey: a negative bound is refused naming its
// [vector] key, by Validate and by Open; zero (the default) is valid.
func TestOptionsValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		o    Options
		want string
	}{
		{Options{MaxEntries: -1}, `vector.max_entries = -1: must be > 0`},
		{Options{MaxBytes: -1}, `vector.max_bytes = -1: must be > 0`},
		{Options{MaxEntryBytes: -1}, `vector.max_entry_bytes = -1: must be > 0`},
	}
	for _, tt := range tests {
		if err := tt.o.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
		tt.o.Dimension = 4
		if ix, err := Open(tt.o); err == nil {
			ix.Close()
			t.Errorf("Open(%+v) accepted it", tt.o)
		}
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("Validate() of zero fields = %v, want nil", err)
	}
}
