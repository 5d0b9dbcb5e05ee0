package proxy

import (
	"errors"
	"fmt"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

func errorf(format string, args ...any) error {
	if len(args) == 0 {
		return errors.New(format)
	}
	return fmt.Errorf(format, args...)
}

// newID returns a random request or completion ID (128 bits, hex). IDs
// name requests, they guard nothing: math/rand/v2's generator (ChaCha8,
// seeded from the OS) is unpredictable enough and costs no system call per
// request, where crypto/rand did.
func newID() string {
	return string(wire.AppendRandomHex(make([]byte, 0, 32), 16))
}
