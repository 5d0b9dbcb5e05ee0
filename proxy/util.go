package proxy

import (
	"errors"
	"fmt"

	"github.com/breakwater-dev/breakwater/proxy/flow"
)

func errorf(format string, args ...any) error {
	if len(args) == 0 {
		return errors.New(format)
	}
	return fmt.Errorf(format, args...)
}

// newID returns a random request ID (flow.NewID).
func newID() string { return flow.NewID() }
