package verify

import (
	"testing"

	"github.com/breakwater-dev/breakwater/cache/guard"
	"github.com/breakwater-dev/breakwater/embed"
)

func TestComparerWithBuiltinEncoder(t *testing.T) {
	b, err := embed.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	c := &Comparer{Embedder: b, Guard: guard.New(guard.Options{}).Check}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"Paris is the capital of France.", "  paris is the capital of france ", true},
		{"The answer is a12.", "The answer is a13.", false},
		{"The distance is 42 km.", "The distance is 24 km.", false},
		{"Paris is the capital of France.", "Berlin is the capital of Germany.", false},
		{"", "Paris.", false},
	} {
		if got := c.Same(t.Context(), tc.a, tc.b); got != tc.same {
			t.Errorf("Same(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
	eq := &Comparer{Embedder: b, MinSimilarity: 1}
	if eq.Same(t.Context(), "Paris is the capital of France.", "The capital of France is Paris.") {
		t.Error("MinSimilarity 1 accepted unequal texts")
	}
}

func TestAnswerText(t *testing.T) {
	for body, want := range map[string]string{
		`{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`: "hi",
		`{"choices":[{"text":"done"}]}`:                                 "done",
		`{"choices":[]}`:                                                "",
		`not json`:                                                      "",
	} {
		if got := AnswerText([]byte(body)); got != want {
			t.Errorf("AnswerText(%s) = %q, want %q", body, got, want)
		}
	}
}
