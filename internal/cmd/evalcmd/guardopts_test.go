package evalcmd

import (
	"testing"

	"github.com/breakwater-dev/breakwater/cache/guard"
)

// Every rule the guard names can be disabled, and disabling it changes the
// options.
func TestGuardOptionsDisablesEveryRule(t *testing.T) {
	for _, r := range guard.Reasons {
		o, disabled, err := guardOptions(" " + r + ", ")
		if err != nil {
			t.Errorf("-disable-rules %s: %v", r, err)
			continue
		}
		if o == (guard.Options{}) || len(disabled) != 1 || disabled[0] != r {
			t.Errorf("-disable-rules %s = %+v, %q: want one rule off", r, o, disabled)
		}
	}
}
