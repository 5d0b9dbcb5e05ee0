package evalcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestHalf(t *testing.T) {
	p := Pair{A: "How do I learn Go?", B: "What is the best way to learn Go?"}
	first := Half(p)
	for range 3 {
		if got := Half(p); got != first {
			t.Fatalf("Half(%+v) = %q, then %q; want the same every time", p, first, got)
		}
	}
	// The label does not decide the half.
	q := p
	q.Duplicate = !p.Duplicate
	if got := Half(q); got != first {
		t.Errorf("Half with the other label = %q, want %q", got, first)
	}
	// Roughly half and half, on texts that differ only a little.
	var pairs []Pair
	for i := range 4000 {
		pairs = append(pairs, Pair{A: fmt.Sprintf("question %d", i), B: fmt.Sprintf("question %d?", i)})
	}
	tune, holdout := SplitPairs(pairs, SplitTune), SplitPairs(pairs, SplitHoldout)
	if got, want := len(tune)+len(holdout), len(pairs); got != want {
		t.Fatalf("tune %d + holdout %d = %d pairs, want %d", len(tune), len(holdout), got, want)
	}
	if n := len(tune); n < 1850 || n > 2150 {
		t.Errorf("tune half has %d of %d pairs, want about half", n, len(pairs))
	}
	for _, p := range tune {
		if Half(p) != SplitTune {
			t.Fatalf("SplitPairs(tune) returned %+v of half %q", p, Half(p))
		}
	}
	if got := SplitPairs(pairs, SplitAll); len(got) != len(pairs) {
		t.Errorf("SplitPairs(all) = %d pairs, want %d", len(got), len(pairs))
	}
}

func TestRunSplit(t *testing.T) {
	var pairs []Pair
	for i := range 40 {
		pairs = append(pairs, Pair{A: fmt.Sprintf("What is %d plus %d?", i, i), B: fmt.Sprintf("What's %d plus %d?", i, i), Duplicate: i%2 == 0})
	}
	path := writePairs(t, pairs)
	total := 0
	for _, half := range []string{SplitTune, SplitHoldout} {
		var stdout, stderr bytes.Buffer
		args := []string{"-pairs", path, "-json", "-thresholds", "0.5", "-split", half}
		if err := runEval(t.Context(), args, &stdout, &stderr, testDeps(t, &fakeEmbedder{})); err != nil {
			t.Fatalf("eval -split %s: %v", half, err)
		}
		var rep Report
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Split != half {
			t.Errorf("Split = %q, want %q", rep.Split, half)
		}
		if want := len(SplitPairs(pairs, half)); rep.Pairs != want {
			t.Errorf("-split %s: Pairs = %d, want %d", half, rep.Pairs, want)
		}
		total += rep.Pairs
	}
	if total != len(pairs) {
		t.Errorf("tune + holdout = %d pairs, want %d", total, len(pairs))
	}
	var stdout, stderr bytes.Buffer
	err := runEval(t.Context(), []string{"-pairs", path, "-split", "train"}, &stdout, &stderr, testDeps(t, &fakeEmbedder{}))
	if err == nil || !strings.Contains(err.Error(), "unknown half") {
		t.Errorf("eval -split train error = %v, want one naming the unknown half", err)
	}
}
