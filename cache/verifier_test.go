package cache

import (
	"context"
	"strings"
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

// userKey is chatKey asked by end user user.
func userKey(t *testing.T, user, query string) Key {
	k := chatKey(t, "A", "S", query)
	k.EndUser = user
	return k
}

// crossUserCache is a semanticCache under scope whose qBase entry was
// stored by end user "alice".
func crossUserCache(t *testing.T, scope string, v Verifier) *Cache {
	t.Helper()
	idx := newMemIndex()
	c := newCache(t, Options{Index: idx, Embedder: vectorEmbedder(standardVectors()), Threshold: 0.9, CrossUser: scope, Verifier: v})
	c.Store(t.Context(), userKey(t, "alice", qBase), Entry{Model: "m", Body: []byte("paris")})
	waitIndexed(t, idx, 1)
	return c
}

func TestEndUserIsStoredHashed(t *testing.T) {
	idx := newMemIndex()
	secret := []byte("0123456789abcdef0123456789abcdef")
	c := newCache(t, Options{Index: idx, Embedder: vectorEmbedder(standardVectors()), UserSecret: secret})
	c.Store(t.Context(), userKey(t, "alice@example.com", qBase), Entry{Body: []byte("paris")})
	waitIndexed(t, idx, 1)
	var got Entry
	idx.mu.Lock()
	for _, it := range idx.items {
		got = it.Entry
	}
	idx.mu.Unlock()
	if want := EndUserHash(secret, "A", "alice@example.com"); got.User != want || len(want) != 32 || strings.Contains(got.User, "alice") {
		t.Errorf("stored User = %q, want the keyed hash %q", got.User, want)
	}
	if EndUserHash(secret, "A", "alice") == EndUserHash(secret, "B", "alice") {
		t.Error("one identity hashes alike in two partitions")
	}
	if EndUserHash(secret, "A", "alice") == EndUserHash([]byte("another secret, 16+ bytes"), "A", "alice") {
		t.Error("the hash does not depend on the secret")
	}
	if h := EndUserHash(secret, "A", ""); h != "" {
		t.Errorf("no identity hashes to %q, want \"\" (the anonymous user)", h)
	}
}

func TestCrossUserScopes(t *testing.T) {
	yes := &scriptVerifier{floor: 0.8, verdicts: map[string]bool{qBase: true}}
	none := &scriptVerifier{floor: 0.8, noVerdict: true}
	tests := []struct {
		name    string
		scope   string
		v       Verifier
		served  bool
		foreign bool // a miss reports the refused candidate for agreement
	}{
		{"agreed, static", CrossUserAgreed, nil, false, true},
		{"agreed, judge verifies", CrossUserAgreed, yes, true, false},
		{"agreed, judge gives no verdict", CrossUserAgreed, none, false, true},
		{"any", CrossUserAny, nil, true, false},
		{"never, static", CrossUserNever, nil, false, false},
		{"never, judge verifies", CrossUserNever, yes, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := crossUserCache(t, tc.scope, tc.v)
			// alice is served her own entry under every scope.
			if _, ok := c.Lookup(t.Context(), userKey(t, "alice", qPara), LookupOptions{}); !ok {
				t.Error("alice was refused her own entry")
			}
			r, ok := c.Lookup(t.Context(), userKey(t, "bob", qPara), LookupOptions{})
			if ok != tc.served {
				t.Fatalf("bob served = %v, want %v", ok, tc.served)
			}
			if got := r.Foreign != nil && r.Foreign.Entry.Query == qBase; got != tc.foreign {
				t.Errorf("Foreign = %+v, want set: %v", r.Foreign, tc.foreign)
			}
			if !ok && c.Stats(t.Context()).CrossUserRefusals == 0 {
				t.Error("a refusal was not counted")
			}
		})
	}
}

// An agreed entry is served to every end user under "agreed", never under
// "never".
func TestAgreedEntryCrossesUsers(t *testing.T) {
	for _, scope := range []string{CrossUserAgreed, CrossUserNever} {
		idx := newMemIndex()
		c := newCache(t, Options{Index: idx, Embedder: vectorEmbedder(standardVectors()), Threshold: 0.9, CrossUser: scope})
		c.Store(t.Context(), userKey(t, "carol", qBase), Entry{Body: []byte("paris"), Agreed: true})
		waitIndexed(t, idx, 1)
		_, ok := c.Lookup(t.Context(), userKey(t, "dave", qPara), LookupOptions{})
		if want := scope == CrossUserAgreed; ok != want {
			t.Errorf("%s: dave served an agreed entry = %v, want %v", scope, ok, want)
		}
		if got := c.Stats(t.Context()).Agreements; got != 1 {
			t.Errorf("%s: Agreements = %d, want 1", scope, got)
		}
	}
}
