package app

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const probeConfig = `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
[cache]
data_dir = "{{DATA}}"
[cache.verify]
# No false-hit sampling: a sampled hit is served as a miss (2 % by
# default), and the test's last request must be a semantic hit.
sample_rate = 0
[embed]
provider = "openai"
[embed.openai]
base_url = "{{UP2}}/v1"
model = "test-embed"
[retry]
max_attempts = 2
base_delay = "1ms"
max_delay = "5ms"
deadline = "10s"
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
[[models]]
name = "gpt-test"
targets = [{upstream = "primary"}]
`

// bagOfWords is a fake embeddings endpoint: each lower-cased word adds to
// one of 16 dimensions, so texts with the same words get the same vector.
// It answers 404 while down is set, and counts those refusals, other than
// /readyz's ("readiness probe"), in refused.
func bagOfWords(down *atomic.Bool, refused *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if down.Load() {
			// 404, not 503: the embedder does not retry it itself, so each
			// refusal is one try of the opener's own loop.
			http.Error(w, `{"error":{"message":"no such deployment yet","type":"invalid_request_error"}}`, http.StatusNotFound)
			if len(req.Input) != 1 || req.Input[0] != "readiness probe" {
				refused.Add(1)
			}
			return
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Object string `json:"object"`
			Data   []item `json:"data"`
			Model  string `json:"model"`
		}{Object: "list", Model: "test-embed"}
		for i, text := range req.Input {
			v := make([]float32, 16)
			for _, word := range strings.Fields(strings.ToLower(strings.Trim(text, "?!."))) {
				h := fnv.New32a()
				h.Write([]byte(word))
				v[h.Sum32()%16]++
			}
			var n float64
			for _, x := range v {
				n += float64(x * x)
			}
			for j := range v {
				v[j] /= float32(math.Sqrt(n))
			}
			out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: v})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}

// TestEmbeddingsDownAtStartOpensLater checks an OpenAI-compatible embedder
// with no configured dimension that is down at start: the sidecar serves
// at once (misses, exact hits), /readyz says the index is loading, and
// when the endpoint comes back the index opens and semantic hits work —
// the tier is not left off for the life of the process.
func TestEmbeddingsDownAtStartOpensLater(t *testing.T) {
	var down atomic.Bool
	var refused atomic.Int64
	down.Store(true)
	es := httptest.NewServer(bagOfWords(&down, &refused))
	defer es.Close()
	us := httptest.NewServer(&model{})
	defer us.Close()
	r := launch(t, func(string) string { return "" }, probeConfig, us.URL, es.URL)

	if status, h, body := r.chat(t, "Which river is the longest?"); status != http.StatusOK || h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("first request while the embedder is down: %d %q %s", status, h.Get("X-Breakwater-Cache"), body)
	}
	if _, h, _ := r.chat(t, "Which river is the longest?"); h.Get("X-Breakwater-Cache") != "hit-exact" {
		t.Errorf("repeat while the embedder is down = %q, want hit-exact", h.Get("X-Breakwater-Cache"))
	}
	code, body := readyz(t, r)
	if loading, _ := body["loading"].([]any); code != http.StatusOK || len(loading) != 1 || loading[0] != "index" {
		t.Errorf("/readyz while the embedder is down = %d %v, want 200 with the index loading", code, body)
	}
	// The opener asked for the dimension, was refused, and asked again.
	deadline := time.Now().Add(30 * time.Second)
	for refused.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the index opener never called the embeddings endpoint")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-r.app.IndexOpened():
		t.Fatal("the index opened while the embedder could not give its dimension")
	default:
	}

	down.Store(false)
	select {
	case <-r.app.IndexOpened():
	case <-time.After(60 * time.Second):
		t.Fatal("the index did not open within 60s of the embedder coming back")
	}
	if code, body := readyz(t, r); code != http.StatusOK || body["status"] != "ready" {
		t.Errorf("/readyz after the embedder came back = %d %v, want 200 ready", code, body)
	}
	if _, h, _ := r.chat(t, "Which is the longest river?"); h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("first semantic-era question = %q, want miss", h.Get("X-Breakwater-Cache"))
	}
	// The answer is indexed in the background: ask the paraphrase once it
	// is (asked sooner, it is a miss whose own answer then hits exactly).
	waitFor(t, "the answer to be indexed", func() bool { return strings.Contains(r.get(t, "/stats"), `"semantic":1`) })
	if _, h, _ := r.chat(t, "which is the LONGEST river"); h.Get("X-Breakwater-Cache") != "hit-semantic" {
		t.Fatalf("paraphrase after the embedder came back = %q, want hit-semantic", h.Get("X-Breakwater-Cache"))
	}
}
