//go:build !linux

package embedded

import "unsafe"

// adviseHuge is a no-op where madvise(MADV_HUGEPAGE) is not available.
func adviseHuge(unsafe.Pointer, int) {}
