//go:build unix

package embedded

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time of this process. Benchmarks report
// it per op next to wall time: on a shared machine the wall time includes
// waiting for a core, the CPU time does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
