//go:build !unix

package embed

import "time"

// processCPU is unavailable here; benchmarks then report 0 cpu-ns/op.
func processCPU() time.Duration { return 0 }
