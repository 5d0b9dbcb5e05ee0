package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// The LLM judge asks through the upstream caller: a Chat Completions request
// to the configured upstream, whose verdict comes back parsed.
func TestLLMJudgeThroughTheCaller(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" || !strings.Contains(string(body), `"model":"small"`) {
			http.Error(w, `{"error":{"message":"unexpected request"}}`, http.StatusBadRequest)
			return
		}
		calls.Add(1)
		same := strings.Contains(string(body), "paris city") // the second candidate
		w.Header().Set("Content-Type", "application/json")
		verdict := `{\"same\": false}`
		if same {
			verdict = `{\"same\": true}`
		}
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`+verdict+`"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(up.Close)
	c, err := upstream.New(upstream.Options{
		Upstreams:       []upstream.Upstream{{Name: "u", BaseURL: up.URL + "/v1"}},
		DefaultUpstream: "u",
		Retry:           upstream.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	j, err := verify.NewLLM(verify.LLMOptions{Caller: judgeCaller{c}, Model: "small"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Judge(t.Context(), "paris capital", []string{"rome capital", "paris city"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] || !got[1] {
		t.Errorf("verdicts %v, want [false true]", got)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d judge calls upstream, want 2", n)
	}
}
