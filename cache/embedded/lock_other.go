//go:build !unix

package embedded

import (
	"os"
	"path/filepath"
)

// lockDir only creates dir/LOCK: there is no advisory locking here, so
// running two processes on one store is the operator's mistake to avoid.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
}
