package cache

import (
	"errors"
	"testing"

	"github.com/breakwater-dev/breakwater/lib/setting"
)

// A partition_by list is judged once, by its canonical headers, for the
// config and for NewPartitioner alike.
func TestValidatePartitionBy(t *testing.T) {
	tests := []struct {
		name string
		by   []string
		bad  string // the key of the one problem; "": valid
	}{
		{"shared", nil, ""},
		{"authorization and namespace", []string{"authorization", "namespace"}, ""},
		{"headers", []string{"header:X-Tenant-ID", "header:X-Org"}, ""},
		{"keyword capitalised", []string{"Authorization"}, "cache.partition_by[0]"},
		{"unknown", []string{"namespace", "cookie"}, "cache.partition_by[1]"},
		{"header without name", []string{"header:"}, "cache.partition_by[0]"},
		{"header with space", []string{"header:X Tenant"}, "cache.partition_by[0]"},
		{"same header in two cases", []string{"header:X-Tenant", "header:x-tenant"}, "cache.partition_by[1]"},
		{"namespace by its header", []string{"namespace", "header:X-Breakwater-Namespace"}, "cache.partition_by[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidatePartitionBy(tt.by)
			_, nerr := NewPartitioner(testSecret, tt.by)
			if tt.bad == "" {
				if err != nil || nerr != nil {
					t.Fatalf("ValidatePartitionBy = %v, NewPartitioner = %v, want nil", err, nerr)
				}
				return
			}
			var se *setting.Error
			if !errors.As(err, &se) || se.Key != tt.bad || len(setting.List(err)) != 1 {
				t.Errorf("ValidatePartitionBy(%q) = %v, want one problem naming %s", tt.by, err, tt.bad)
			}
			if nerr == nil {
				t.Errorf("NewPartitioner(%q) succeeded, want an error", tt.by)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero Options: %v, want nil", err)
	}
	err := Options{Threshold: 1.5, TTL: -1, QueueSize: -1, QueueBytes: -1}.Validate()
	var keys []string
	for _, e := range setting.List(err) {
		var se *setting.Error
		if errors.As(e, &se) {
			keys = append(keys, se.Key)
		}
	}
	if want := []string{"cache.threshold", "cache.ttl", "cache.write_queue"}; len(keys) != len(want) || keys[0] != want[0] || keys[1] != want[1] || keys[2] != want[2] {
		t.Errorf("Validate() names %q, want %q (a negative QueueBytes is no limit)", keys, want)
	}
}
