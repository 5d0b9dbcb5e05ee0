package cache

import (
	"context"
	"sync"
	"testing"
)

// scriptVerifier answers from a table keyed by candidate query; missing
// candidates get no verdict.
type scriptVerifier struct {
	floor     float32
	verdicts  map[string]bool
	noVerdict bool
	mu        sync.Mutex
	asked     [][]string
}

func (s *scriptVerifier) Floor() float32 { return s.floor }
func (s *scriptVerifier) Limit() int     { return 3 }
func (s *scriptVerifier) Verify(_ context.Context, _, _ string, cands []Entry) ([]bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var qs []string
	for _, c := range cands {
		qs = append(qs, c.Query)
	}
	s.asked = append(s.asked, qs)
	if s.noVerdict {
		return nil, false
	}
	out := make([]bool, len(cands))
	for i, c := range cands {
		out[i] = s.verdicts[c.Query]
	}
	return out, true
}

func TestVerifierServesBelowThreshold(t *testing.T) {
	v := &scriptVerifier{floor: 0.8, verdicts: map[string]bool{qBase: true}}
	c, _, _ := semanticCache(t, func(o *Options) { o.Verifier = v })
	// qFar scores 0.85: under the 0.9 threshold, above the floor.
	r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qFar), LookupOptions{})
	if !ok || r.Tier != TierSemantic || string(r.Entry.Body) != "paris" {
		t.Fatalf("Lookup = %+v, %v; want the judged candidate served", r, ok)
	}
	if len(v.asked) != 1 || len(v.asked[0]) != 1 || v.asked[0][0] != qBase {
		t.Errorf("asked %v, want [[%q]]", v.asked, qBase)
	}
}

func TestVerifierRejectionIsNearMiss(t *testing.T) {
	v := &scriptVerifier{floor: 0.8, verdicts: map[string]bool{qBase: false}}
	c, _, _ := semanticCache(t, func(o *Options) { o.Verifier = v })
	// qPara scores 0.95, above the static threshold; the judge still refuses.
	r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{})
	if ok {
		t.Fatalf("Lookup served %q despite a rejection", r.Entry.Query)
	}
	if r.Near == nil || r.Near.Entry.Query != qBase || r.Near.Score < 0.94 {
		t.Errorf("Near = %+v, want the rejected candidate %q", r.Near, qBase)
	}
}

func TestVerifierFallbackUsesThreshold(t *testing.T) {
	v := &scriptVerifier{floor: 0.8, noVerdict: true}
	c, _, _ := semanticCache(t, func(o *Options) { o.Verifier = v })
	if r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qFar), LookupOptions{}); ok {
		t.Errorf("without a verdict, 0.85 < 0.9 was served: %+v", r)
	} else if r.Near == nil {
		t.Error("a candidate above the floor was not reported as a near miss")
	}
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{}); !ok {
		t.Error("without a verdict, 0.95 >= 0.9 was not served")
	}
}

func TestVerifierRespectsClientThreshold(t *testing.T) {
	v := &scriptVerifier{floor: 0.8, verdicts: map[string]bool{qBase: true}}
	c, _, _ := semanticCache(t, func(o *Options) { o.Verifier = v })
	if _, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qFar), LookupOptions{Threshold: 0.9}); ok {
		t.Error("X-Breakwater-Threshold 0.9 was lowered to the judge's floor")
	}
	if len(v.asked) != 0 {
		t.Errorf("the judge was asked %v for a candidate under the client's threshold", v.asked)
	}
}

func TestVerifierNeverSeesOtherTenants(t *testing.T) {
	v := &scriptVerifier{floor: 0.8, verdicts: map[string]bool{qBase: true}}
	c, _, _ := semanticCache(t, func(o *Options) { o.Verifier = v })
	if r, ok := c.Lookup(t.Context(), chatKey(t, "B", "S", qPara), LookupOptions{}); ok {
		t.Fatalf("tenant B got tenant A's entry: %+v", r)
	}
	if len(v.asked) != 0 {
		t.Errorf("the judge was asked about another tenant's entries: %v", v.asked)
	}
}

func TestJudgedGuardIsLooserOnlyWithAVerdict(t *testing.T) {
	strict := func(q, c string) (bool, string) { return false, "content" }
	loose := func(q, c string) (bool, string) { return true, "" }
	for _, noVerdict := range []bool{false, true} {
		v := &scriptVerifier{floor: 0.8, verdicts: map[string]bool{qBase: true}, noVerdict: noVerdict}
		c, _, _ := semanticCache(t, func(o *Options) { o.Verifier, o.Guard, o.JudgedGuard = v, strict, loose })
		r, ok := c.Lookup(t.Context(), chatKey(t, "A", "S", qPara), LookupOptions{})
		if !noVerdict && !ok {
			t.Error("a candidate the judged guard passes and the judge accepts was not served")
		}
		if noVerdict {
			if ok {
				t.Errorf("without a verdict, a candidate the strict guard refuses was served: %+v", r)
			}
			if got := c.Stats(t.Context()).GuardRejections["content"]; got != 1 {
				t.Errorf("strict guard rejections = %d, want 1", got)
			}
		}
	}
}
