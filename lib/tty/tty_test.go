package tty

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestIsTerminalFalseForFilesAndBuffers(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file reported as a terminal")
	}
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer reported as a terminal")
	}
}
