package verify

import "testing"

// The verifier compares answers of every wire format the proxy caches.
func TestAnswerTextGemini(t *testing.T) {
	for body, want := range map[string]string{
		`{"choices":[{"message":{"role":"assistant","content":"Paris"}}]}`: "Paris",
		`{"choices":[{"text":"Paris"}]}`:                                   "Paris",
		`{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"Par"},{"text":"is"}],"role":"model"}}]}`: "Paris",
		`{"candidates":[]}`: "",
		`not json`:          "",
	} {
		if got := AnswerText([]byte(body)); got != want {
			t.Errorf("AnswerText(%s) = %q, want %q", body, got, want)
		}
	}
}
