// Package suggest finds the name a mistyped one most likely meant, for the
// "did you mean" hints of the command line and the configuration.
package suggest

// MaxEdits is the farthest a name may be from a mistyped one and still be
// suggested: two edits.
const MaxEdits = 2

// Distance is the Damerau-Levenshtein distance between a and b, in bytes:
// an insertion, a deletion, a substitution or a swap of two adjacent bytes
// each count one edit, so "dmeo" is one edit from "demo".
func Distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Closest returns the candidate nearest to name within MaxEdits, the first
// of the nearest on a tie, or "" when none is that near.
func Closest(name string, candidates []string) string {
	best, bestD := "", MaxEdits+1
	for _, c := range candidates {
		if d := Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
