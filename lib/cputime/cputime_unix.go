//go:build unix

// Package cputime reads the CPU time of this process, which benchmarks
// report per operation beside wall time.
package cputime

import (
	"syscall"
	"time"
)

// Process is the user+system CPU time of this process so far. On a shared
// machine the wall time of a benchmark includes waiting for a core; this
// does not.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
