//go:build !unix

// Package cputime reads the CPU time of this process, which benchmarks
// report per operation beside wall time.
package cputime

import "time"

// Process is unavailable here: it reports 0, and so do the benchmarks'
// cpu-ns/op.
func Process() time.Duration { return 0 }
