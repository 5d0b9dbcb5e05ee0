//go:build !amd64 || purego

package embedded

// dot returns the dot product of a and b (same length); see dotGeneric.
func dot(a, b []float32) float32 { return dotGeneric(a, b) }
