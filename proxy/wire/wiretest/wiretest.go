// Package wiretest holds helpers that the tests of package proxy and of the
// wire APIs' packages share. Tests import it; nothing else does.
package wiretest

import (
	"encoding/json"
	"reflect"
	"testing"
)

// JSONEqual reports whether two JSON texts hold the same value, whatever
// their key order and spacing.
func JSONEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("not JSON: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}
