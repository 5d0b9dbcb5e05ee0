package embed

import (
	"testing"
	"time"
)

// TestOpenAIOptionsValidateNamesTheKey: a negative dimensions or timeout is
// refused naming its [embed.openai] key; zero (the default) is valid.
func TestOpenAIOptionsValidateNamesTheKey(t *testing.T) {
	for _, tt := range []struct {
		o    OpenAIOptions
		want string
	}{
		{OpenAIOptions{Dimensions: -1}, `embed.openai.dimensions = -1: must be >= 0 (0: the model's native size)`},
		{OpenAIOptions{Timeout: -time.Second}, `embed.openai.timeout = -1s: must be > 0`},
	} {
		if err := tt.o.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
	}
	if err := (OpenAIOptions{}).Validate(); err != nil {
		t.Errorf("Validate() of zero fields = %v, want nil", err)
	}
}
