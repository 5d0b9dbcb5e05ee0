package gemini

import (
	"github.com/breakwater-dev/breakwater/proxy/wire/wiretest"

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

// jsonEqual: the shared helper (wiretest).
var jsonEqual = wiretest.JSONEqual

// decodeNumbers and reformat are the key tests' helpers of package cache.
