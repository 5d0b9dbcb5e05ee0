package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

func errorf(format string, args ...any) error {
	if len(args) == 0 {
		return errors.New(format)
	}
	return fmt.Errorf(format, args...)
}

// newID returns a random request or completion ID (128 bits, hex).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
