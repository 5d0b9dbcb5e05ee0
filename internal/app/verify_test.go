package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestVerifiedRerankAtUpstreamBaseURL runs the sidecar with judge = "rerank"
// and no url: the judge must post to the default upstream's base URL, and a
// paraphrase below a strict static threshold is served once it accepts.
func TestVerifiedRerankAtUpstreamBaseURL(t *testing.T) {
	up := &model{}
	var reranks atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", up)
	mux.HandleFunc("POST /v1/rerank", func(w http.ResponseWriter, r *http.Request) {
		reranks.Add(1)
		var req struct {
			Model     string   `json:"model"`
			Query     string   `json:"query"`
			Documents []string `json:"documents"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "test-reranker" {
			http.Error(w, "bad rerank request", http.StatusBadRequest)
			return
		}
		var res []string
		for i := range req.Documents {
			res = append(res, fmt.Sprintf(`{"index":%d,"relevance_score":0.97}`, i))
		}
		fmt.Fprintf(w, `{"results":[%s]}`, strings.Join(res, ","))
	})
	us := httptest.NewServer(mux)
	defer us.Close()
	cfg := fmt.Sprintf(baseConfig, "0.99") + `
[cache.verify]
judge = "rerank"
model = "test-reranker"
min_similarity = 0.80
sample_rate = 0
`
	r := start(t, cfg, us.URL, us.URL)
	if _, h, _ := r.chat(t, "How do I reset my password?"); h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("first: %q", h.Get("X-Breakwater-Cache"))
	}
	waitFor(t, "the judged paraphrase to hit", func() bool {
		_, h, _ := r.chat(t, "How can I reset my password?")
		return h.Get("X-Breakwater-Cache") == "hit-semantic"
	})
	if reranks.Load() == 0 {
		t.Fatal("the reranker at the upstream's base URL was never called")
	}
	var st struct {
		Verify struct {
			Judge struct {
				Judge   string `json:"judge"`
				Calls   uint64 `json:"calls"`
				Accepts uint64 `json:"accepts"`
			} `json:"judge"`
			FalseHitRate *struct{ High float64 } `json:"false_hit_rate"`
		} `json:"verify"`
	}
	if err := json.Unmarshal([]byte(r.get(t, "/stats")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Verify.Judge.Judge != "rerank" || st.Verify.Judge.Calls == 0 || st.Verify.Judge.Accepts == 0 || st.Verify.FalseHitRate == nil {
		t.Errorf("/stats verify = %+v", st.Verify)
	}
	m := r.get(t, "/metrics")
	for _, want := range []string{`breakwater_verify_judge_calls_total`, `breakwater_verify_verdicts_total{verdict="accept"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
