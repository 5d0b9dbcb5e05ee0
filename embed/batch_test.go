package embed

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestBuiltinConcurrentCallsMatchAlone: calls made at the same time share
// encoder passes, and every text still gets the vector it gets alone, bit
// for bit (texts of different lengths, single and multi-text calls).
func TestBuiltinConcurrentCallsMatchAlone(t *testing.T) {
	b := testBuiltin(t)
	var texts []string
	for i := range 24 {
		texts = append(texts, fmt.Sprintf("question %d: %s", i, "how do I reset the password of my account before the meeting"[:10+i*2]))
	}
	want := make([][]float32, len(texts))
	for i, text := range texts {
		v, err := b.Embed(t.Context(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = v[0]
	}
	got := make([][]float32, len(texts))
	errs := make(chan error, len(texts))
	var wg sync.WaitGroup
	for i := 0; i < len(texts); i += 3 {
		wg.Go(func() { // a call of one text
			v, err := b.Embed(t.Context(), texts[i:i+1])
			if err != nil {
				errs <- err
				return
			}
			got[i] = v[0]
		})
		wg.Go(func() { // a call of two
			v, err := b.Embed(t.Context(), texts[i+1:i+3])
			if err != nil {
				errs <- err
				return
			}
			got[i+1], got[i+2] = v[0], v[1]
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range texts {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("text %d: concurrent vector differs from the one alone", i)
		}
	}
}
