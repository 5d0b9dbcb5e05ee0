package anthropic

import (
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

func TestRequestCost(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"abcd","messages":[{"role":"user","content":[
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAAAAAAAAAAAAAAAAAAAAAA"}},{"type":"text","text":"abcdefgh"}]}]}`
	// "abcd" "user" "image" "base64" "text" "abcdefgh": 31 characters, the image's bytes left out.
	if got, want := requestCost([]byte(body)), (upstream.Cost{Input: 8, Output: 1024}); got != want {
		t.Errorf("RequestCost = %+v, want %+v", got, want)
	}
}
