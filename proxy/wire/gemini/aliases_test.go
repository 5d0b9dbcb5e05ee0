package gemini

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/breakwater-dev/breakwater/cache/keytest"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// The key tests' shared helpers (cache/keytest).
var (
	decodeNumbers = keytest.DecodeNumbers
	reformat      = keytest.Reformat
)

// The tests moved here from package proxy keep the names they had there.
type (
	sseEvent        = wire.Event
	StreamAssembler = wire.StreamAssembler
)

const resumeInstruction = wire.ResumeInstruction

var errNoResume = wire.ErrNoResume

// jsonEqual is the helper of package proxy's tests that these tests use.
func jsonEqual(t *testing.T, got, want []byte) bool {
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

// decodeNumbers and reformat are the key tests' helpers of package cache.
