package proxy

import (
	"fmt"
	"testing"
)

// TestSemanticMissEmbedsOnce checks the question of a semantic miss goes
// through the embedder once, for the lookup: the write-back stores the
// lookup's vector instead of embedding the question again, streamed or not.
func TestSemanticMissEmbedsOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	const n = 6
	for i := range n {
		q := fmt.Sprintf("question number %d about rivers in country %d", i, i)
		if i%2 == 1 {
			if _, _, err := streamChat(t, e, q); err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			continue
		}
		if r := e.post("/v1/chat/completions", chat(q)); r.status != 200 {
			t.Fatalf("request %d: status %d", i, r.status)
		}
	}
	e.waitIndexed(n)
	if got := e.embedder.texts.Load(); got != n {
		t.Errorf("embedder saw %d texts for %d new questions, want %d (one per question)", got, n, n)
	}
}
