package embedded

import "unsafe"

// chunkSlab returns n chunks of chunkLen elements cut from one allocation,
// each capped at its length, and asks the kernel to back the allocation
// with huge pages (hugepage_linux.go). A loaded index maps gigabytes in
// one go: with 4 KB pages every page is a fault, and on a VM each fault
// is also the host's (1 GB touched in 3.7–4.6 s with 4 KB pages, 2.2–2.9 s
// with MADV_HUGEPAGE, on the 2-core benchmark VM). The chunks are dropped
// together (the bucket goes, or its half copy), so one allocation holds
// nothing longer than separate ones would.
func chunkSlab[T float32 | uint16](n, chunkLen int) [][]T {
	if n == 0 {
		return nil
	}
	slab := make([]T, n*chunkLen)
	adviseHuge(unsafe.Pointer(unsafe.SliceData(slab)), len(slab)*int(unsafe.Sizeof(slab[0])))
	out := make([][]T, n)
	for i := range out {
		out[i] = slab[i*chunkLen : (i+1)*chunkLen : (i+1)*chunkLen]
	}
	return out
}
