package proxy

import "github.com/breakwater-dev/breakwater/proxy/wire"

// The shared helpers moved to proxy/wire; the tests keep their names.
var (
	words    = wire.Words
	truncate = wire.Truncate
)

const resumeInstruction = wire.ResumeInstruction
