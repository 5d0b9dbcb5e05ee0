package gemini

import (
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

func TestRequestCost(t *testing.T) {
	body := `{"contents":[{"role":"user","parts":[{"text":"abcdefgh"},{"inlineData":{"mimeType":"image/png","data":"AAAAAAAAAAAAAAAA"}}]}],
		"generationConfig":{"maxOutputTokens":200,"candidateCount":2}}`
	// "user" "abcdefgh": 12 characters, the inline data left out.
	if got, want := requestCost([]byte(body)), (upstream.Cost{Input: 3, Output: 400}); got != want {
		t.Errorf("RequestCost = %+v, want %+v", got, want)
	}
	if got := requestCost([]byte(`{"contents":[]}`)); got.Output != 0 {
		t.Errorf("no maxOutputTokens: Output = %d, want 0 (the lane's typical output)", got.Output)
	}
}
