package embedded

import (
	"syscall"
	"unsafe"
)

// adviseHuge marks the 2 MB-aligned interior of the n bytes at p
// MADV_HUGEPAGE (madvise(2)): with transparent huge pages in "madvise" mode,
// the common default, faults there map 2 MB at a time. Go's heap does not
// ask for huge pages itself. Best effort: an error leaves 4 KB pages.
func adviseHuge(p unsafe.Pointer, n int) {
	const huge = 2 << 20
	start := (uintptr(p) + huge - 1) &^ (huge - 1)
	end := (uintptr(p) + uintptr(n)) &^ (huge - 1)
	if end <= start {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start), syscall.MADV_HUGEPAGE)
}
