package flow

import (
	"fmt"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

func TestErrorMessagesNameTheSetting(t *testing.T) {
	for _, err := range []error{errStreamTooLarge, errEventTooLarge} {
		if !strings.Contains(err.Error(), "stream.max_") {
			t.Errorf("%q does not name its setting", err)
		}
	}
	if resumable(errStreamTooLarge) || resumable(fmt.Errorf("x: %w", upstream.ErrDeadline)) || !resumable(errIdle) {
		t.Errorf("resumable: bounds must not be resumed, an idle cut must")
	}
}
