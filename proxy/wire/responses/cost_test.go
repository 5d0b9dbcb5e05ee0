package responses

import (
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

func TestRequestCost(t *testing.T) {
	body := `{"model":"gpt-4o","previous_response_id":"resp_0123456789abcdef","input":"abcdefgh","max_output_tokens":50}`
	if got, want := requestCost([]byte(body)), (upstream.Cost{Input: 2, Output: 50}); got != want {
		t.Errorf("RequestCost = %+v, want %+v", got, want)
	}
}
