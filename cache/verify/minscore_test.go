package verify

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A negative MinScore is no minimum: a reranker that answers raw logits
// (below zero for an unrelated pair) has every candidate accepted.
func TestRerankNegativeMinScoreAcceptsEveryScore(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"results":[{"index":0,"relevance_score":-7.5},{"index":1,"relevance_score":0.2}]}`)
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		min  float64
		want string
	}{{-1, "[true true]"}, {0, "[false false]"}, {0.1, "[false true]"}} {
		r, err := NewRerank(RerankOptions{URL: srv.URL, MinScore: c.min})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Judge(t.Context(), "q", []string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("MinScore %v: verdicts %v, want %s", c.min, got, c.want)
		}
	}
}
