package embedded

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/x448/float16"
)

// Half-precision copy of the vectors, for the graph walk.
//
// A search at 100k × 512 dims visits a few thousand nodes scattered over a
// 200 MB vector store, so it is bound by memory traffic, not arithmetic:
// each float32 vector is 2 KB fetched from RAM. A bucket with a graph
// therefore also keeps each vector as IEEE 754 binary16 (1 KB), which the
// walk reads (dotHalf: F16C converts as it loads); the final candidates are
// re-ranked with the float32 vectors, so returned scores are exact. The
// half copy only lives in memory, derived from the float32 vectors when a
// graph is built or loaded: the snapshot format does not change.
//
// Unit-vector components are ≤ 1 in magnitude; binary16 keeps 11
// significant bits down to 6.1e-5 (subnormals below), so a 512-dim dot
// product is off by ~1e-4 at most, far below the gaps the walk ranks by.

// useHalf reports whether graph searches walk the half copy: only where a
// kernel converts halves in hardware (halfKernel), since converting in Go
// costs more than the memory traffic it saves.
var useHalf = halfKernel

// halfAt returns slot i's half vector; enableHalf must have been called.
func (s *vecStore) halfAt(i int32) []uint16 {
	c := s.half[i>>chunkShift]
	off := int(i&(1<<chunkShift-1)) * s.dim
	return c[off : off+s.dim : off+s.dim]
}

// enableHalf makes s keep a half copy of every vector from now on, when
// useHalf is set, and derives it for the vectors already stored.
func (s *vecStore) enableHalf() {
	if !useHalf || s.withHalf {
		return
	}
	s.withHalf = true
	s.half = chunkSlab[uint16](len(s.chunks), (1<<chunkShift)*s.dim)
	// Chunks convert independently: on every CPU, since a loaded snapshot
	// of 1M entries converts 2 GB here before the store opens.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(s.chunks)) {
		wg.Go(func() {
			for ci := int(next.Add(1) - 1); ci < len(s.chunks); ci = int(next.Add(1) - 1) {
				toHalf(s.half[ci], s.chunks[ci])
			}
		})
	}
	wg.Wait()
}

// dropHalf frees the half copy (the bucket lost its graph).
func (s *vecStore) dropHalf() {
	s.withHalf, s.half = false, nil
}

// toHalfGeneric converts src to binary16 into dst (same length).
func toHalfGeneric(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, x := range src {
		dst[i] = f32ToF16(x)
	}
}

// f32ToF16 converts f to binary16, rounding to nearest even as VCVTPS2PH
// does (github.com/x448/float16).
func f32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// f16ToF32 converts a binary16 value to float32 (exactly).
func f16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// dotHalfGeneric is dotGeneric with b in binary16.
func dotHalfGeneric(a []float32, b []uint16) float32 {
	var s0, s1, s2, s3 float32
	for ; len(a) >= 4 && len(b) >= 4; a, b = a[4:], b[4:] {
		s0 += a[0] * f16ToF32(b[0])
		s1 += a[1] * f16ToF32(b[1])
		s2 += a[2] * f16ToF32(b[2])
		s3 += a[3] * f16ToF32(b[3])
	}
	b = b[:len(a)]
	for i := range a {
		s0 += a[i] * f16ToF32(b[i])
	}
	return (s0 + s1) + (s2 + s3)
}
