package evalcmd

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/breakwater-dev/breakwater/cache/guard"
)

// TestRealTier runs a few pairs through the real tier: the built-in encoder,
// the embedded index and the guard.
func TestRealTier(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped by go test -short (no variable enables it: it runs whenever -short is absent, as in CI); it loads the built-in encoder")
	}
	pairs := []Pair{
		{A: "How do I learn to play the guitar?", B: "How can I learn to play guitar?", Duplicate: true},
		{A: "Which is the best phone under Rs. 5000?", B: "Which is the best phone under Rs. 4000?", Duplicate: false},
		{A: "What is the capital of France?", B: "What is the capital of Germany?", Duplicate: false},
		{A: "How do I convert PDF to Word?", B: "How do I convert Word to PDF?", Duplicate: false},
		{A: "What is the best way to lose weight?", B: "What is the recipe for banana bread?", Duplicate: false},
	}
	path := writePairs(t, pairs)
	var stdout, stderr bytes.Buffer
	args := []string{"-pairs", path, "-json", "-thresholds", "0.80:0.99:0.01"}
	if err := runEval(t.Context(), args, &stdout, &stderr, defaultDeps); err != nil {
		t.Fatalf("eval: %v", err)
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode report: %v", err)
	}
	if got, want := rep.Pairs, len(pairs); got != want {
		t.Fatalf("Pairs = %d, want %d", got, want)
	}
	// The paraphrase is a hit with and without the guard at 0.80; the
	// unrelated pair is not; the near misses are hits only without the guard.
	if got, want := rep.WithGuard[0].Correct, 1; got != want {
		t.Errorf("correct guarded hits at 0.80 = %d, want %d", got, want)
	}
	if got, want := rep.WithGuard[0].Hits, 1; got != want {
		t.Errorf("guarded hits at 0.80 = %d, want %d (false hits: %+v)", got, want, rep.Rejections)
	}
	if got := rep.WithoutGuard[0].Hits; got < 3 {
		t.Errorf("unguarded hits at 0.80 = %d, want the near misses (>= 3) to score that high", got)
	}
	reasons := map[string]int{}
	for _, r := range rep.Rejections {
		reasons[r.Reason] += r.NonDuplicate
	}
	for _, want := range []string{guard.ReasonNumber, guard.ReasonName, guard.ReasonOrder} {
		if reasons[want] != 1 {
			t.Errorf("rejections %+v lack one %q", rep.Rejections, want)
		}
	}
}
