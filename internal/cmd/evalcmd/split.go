package evalcmd

import "hash/fnv"

// The halves of -split.
const (
	SplitAll     = "all"     // every pair
	SplitTune    = "tune"    // the half the guard's rules may be tuned on
	SplitHoldout = "holdout" // the other half, to measure them on
)

// Splits lists the values -split accepts.
var Splits = []string{SplitAll, SplitTune, SplitHoldout}

// Half returns the half a pair belongs to, SplitTune or SplitHoldout: the
// low bit of a 64-bit FNV-1a hash of its two texts. It depends only on the
// texts, not on the file's order or the label, so a pair keeps its half when
// the file is shuffled, cut or extended, and a repeated pair stays on one
// side.
func Half(p Pair) string {
	h := fnv.New64a()
	h.Write([]byte(p.A))
	h.Write([]byte{0})
	h.Write([]byte(p.B))
	// FNV's low bit alone depends only on the bytes' low bits; a
	// MurmurHash3 finaliser mixes every bit into it.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	if x&1 == 0 {
		return SplitTune
	}
	return SplitHoldout
}

// SplitPairs returns the pairs of the named half, in file order; SplitAll
// (or "") returns pairs unchanged.
func SplitPairs(pairs []Pair, half string) []Pair {
	if half == SplitAll || half == "" {
		return pairs
	}
	out := make([]Pair, 0, len(pairs)/2+1)
	for _, p := range pairs {
		if Half(p) == half {
			out = append(out, p)
		}
	}
	return out
}
