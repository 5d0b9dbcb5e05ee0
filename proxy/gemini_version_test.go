package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// versionedGemini is the Gemini API as Google serves it at its bare host: a
// path without an API version is a 404. It records the version of every
// call and hands /v1/... to the fake as /v1beta/....
type versionedGemini struct {
	api      *fakeGemini
	mu       sync.Mutex
	versions []string
}

func (v *versionedGemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	version, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if version != "v1beta" && version != "v1" {
		geminiRefuse(w, http.StatusNotFound, `{"error":{"code":404,"message":"no API version in `+r.URL.Path+`","status":"NOT_FOUND"}}`)
		return
	}
	v.mu.Lock()
	v.versions = append(v.versions, version)
	v.mu.Unlock()
	r.URL.Path = "/v1beta/" + rest
	v.api.ServeHTTP(w, r)
}

func (v *versionedGemini) seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.versions...)
}

// TestGeminiBareHostBaseURL: a Gemini upstream whose base_url is the bare
// host ("https://generativelanguage.googleapis.com", no version) gets the
// version each client called, for cached calls, streams, pass-through calls
// on a model and requests naming none.
func TestGeminiBareHostBaseURL(t *testing.T) {
	for _, version := range []string{"v1beta", "v1"} {
		t.Run(version, func(t *testing.T) {
			up := &versionedGemini{api: &fakeGemini{}}
			srv := httptest.NewServer(up)
			t.Cleanup(srv.Close)
			g := &geminiEnv{api: up.api, env: newEnv(t, envOptions{
				proxy: func(o *Options) {
					homeUpstream(o, "gemini", "gemini", mustURL(t, srv.URL))
				},
				caller: func(o *upstream.Options) {
					o.Upstreams = append(o.Upstreams, upstream.Upstream{Name: "gemini", BaseURL: srv.URL, Timeout: 5 * time.Second, MaxConcurrency: 16, MaxQueue: 16})
					o.Routes = append(o.Routes, upstream.Route{Name: geminiFlash, Targets: []upstream.Target{{Upstream: "gemini", Model: geminiFlash}}})
				},
			})}
			c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
				APIKey: "key-a", Backend: genai.BackendGeminiAPI,
				HTTPOptions: genai.HTTPOptions{BaseURL: g.front.URL, APIVersion: version},
			})
			if err != nil {
				t.Fatal(err)
			}
			const q = "What is the capital of France?"
			if text, outcome, err := g.generate(c, geminiFlash, q); err != nil || text != geminiFlash+" says: "+q || outcome != OutcomeMiss {
				t.Fatalf("generate: %q %s %v", text, outcome, err)
			}
			const q2 = "Name three rivers in Europe, please."
			if text, _, outcome, err := g.stream(c, geminiFlash, q2); err != nil || text != geminiFlash+" says: "+q2 || outcome != OutcomeMiss {
				t.Fatalf("stream: %q %s %v", text, outcome, err)
			}
			if resp, err := c.Models.CountTokens(context.Background(), geminiFlash, genai.Text(q), nil); err != nil || resp.TotalTokens != 7 {
				t.Fatalf("countTokens: %+v %v", resp, err)
			}
			want := 3
			if version == "v1beta" {
				// GET /v1/models is OpenAI's list; Gemini's is /v1beta/models.
				resp, err := http.Get(g.front.URL + "/v1beta/models?key=key-a")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "models/"+geminiFlash) {
					t.Fatalf("model list: %d %s", resp.StatusCode, b)
				}
				want++
			}
			seen := up.seen()
			if len(seen) != want {
				t.Fatalf("upstream saw %d versioned calls %v, want %d", len(seen), seen, want)
			}
			for _, v := range seen {
				if v != version {
					t.Errorf("upstream called with version %q, want the client's %q (all: %v)", v, version, seen)
				}
			}
		})
	}
}
