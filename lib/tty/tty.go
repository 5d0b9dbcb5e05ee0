// Package tty tells the sub-commands whether an output is a terminal, so
// progress bars are drawn for people and never into files or pipes.
package tty

import (
	"io"
	"os"

	"golang.org/x/term"
)

// IsTerminal reports whether w is an *os.File connected to a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
