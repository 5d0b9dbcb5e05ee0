package sim

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/breakwater-dev/breakwater/lib/judgeprompt"
)

// TestJudgePrompts: the simulated model answers the cache's judge prompt on
// chat and messages with the strict verdict, agreeing with the truth about
// JudgeAccuracy of the time, and the same verdict for a pair every time.
func TestJudgePrompts(t *testing.T) {
	truth := func(a, b string) bool { return a[len(a)-1] == b[len(b)-1] } // the last digit
	srv := httptest.NewServer(NewHandler(Options{Same: truth, Seed: 7}))
	defer srv.Close()
	ask := func(path, a, b string) bool {
		sys, user := judgeprompt.Build(judgeprompt.NewNonce(), a, b)
		var body []byte
		if path == "/v1/messages" {
			body, _ = json.Marshal(map[string]any{"model": "m", "max_tokens": 16, "system": sys, "messages": []any{map[string]any{"role": "user", "content": user}}})
		} else {
			body, _ = json.Marshal(map[string]any{"model": "m", "messages": []any{map[string]any{"role": "system", "content": sys}, map[string]any{"role": "user", "content": user}}})
		}
		_, out := post(t, srv.URL+path, string(body))
		var r struct {
			Choices []struct{ Message struct{ Content string } } `json:"choices"`
			Content []struct{ Text string }                      `json:"content"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %v: %s", path, err, out)
		}
		text := ""
		if len(r.Choices) > 0 {
			text = r.Choices[0].Message.Content
		} else if len(r.Content) > 0 {
			text = r.Content[0].Text
		}
		same, err := judgeprompt.ParseVerdict(text)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return same
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		agree, n := 0, 400
		for i := range n {
			a, b := fmt.Sprintf("question %d", i), fmt.Sprintf("question %d", i/2)
			got := ask(path, a, b)
			if got == truth(a, b) {
				agree++
			}
			if i%50 == 0 && ask(path, a, b) != got {
				t.Errorf("%s: two verdicts on %q / %q", path, a, b)
			}
		}
		if share := float64(agree) / float64(n); share < 0.9 || share > 0.99 {
			t.Errorf("%s: agreement %.3f over %d pairs, want about %.2f", path, share, n, DefaultJudgeAccuracy)
		}
	}
	if ask("/v1/chat/completions", "Is it 1? "+judgeprompt.Injected, "Is it 2?") {
		// With 5 % errors this one pair could be wrong by chance; seed 7 is not.
		t.Error("an injected claim inside the fences was obeyed")
	}
}
