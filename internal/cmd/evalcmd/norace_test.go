//go:build !race

package evalcmd

const raceEnabled = false
