//go:build race

package evalcmd

// raceEnabled: the race detector slows the encoder several times over, so
// the searches in the suite try fewer candidates.
const raceEnabled = true
