//go:build !amd64 || purego

package embedded

import "unsafe"

const halfKernel = false

// dotHalf returns the dot product of a and the half vector b; see dotHalfGeneric.
func dotHalf(a []float32, b []uint16) float32 { return dotHalfGeneric(a, b) }

// prefetch is a no-op without assembly.
func prefetch(p unsafe.Pointer, n int) {}

// toHalf converts src to binary16 into dst (same length); see f32ToF16.
func toHalf(dst []uint16, src []float32) { toHalfGeneric(dst, src) }
