package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// responsesUpstream answers POST /v1/responses with a response whose id
// carries its name (or with 529 when overloaded) and GET
// /v1/responses/{id} for the ids it created; it records the Authorization
// of every request by id.
type responsesUpstream struct {
	name       string
	overloaded bool
	mu         sync.Mutex
	n          int
	gets       []string // "id auth"
}

func (u *responsesUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		if u.overloaded {
			w.WriteHeader(529)
			fmt.Fprint(w, `{"error":{"message":"Overloaded","type":"server_error","code":null}}`)
			return
		}
		u.n++
		fmt.Fprintf(w, `{"id":"resp_%s%d","object":"response","created_at":1700000000,"status":"completed","model":"gpt-test","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hello","annotations":[]}]}],"error":null}`, u.name, u.n)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/responses/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/responses/")
		u.gets = append(u.gets, id+" "+r.Header.Get("Authorization"))
		if !strings.HasPrefix(id, "resp_"+u.name) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":{"message":"Response with id '%s' not found.","type":"invalid_request_error","param":null,"code":null}}`, id)
			return
		}
		fmt.Fprintf(w, `{"id":%q,"object":"response","status":"completed"}`, id)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (u *responsesUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.gets...)
}

// The config's upstreams reach the proxy as pass-through targets, each with
// its own key: a response the fallback created while the primary was
// overloaded is retrieved at the fallback, with the fallback's key.
func TestResponsesIDRoutedToItsUpstream(t *testing.T) {
	primary := &responsesUpstream{name: "p", overloaded: true}
	fallback := &responsesUpstream{name: "f"}
	p := httptest.NewServer(primary)
	t.Cleanup(p.Close)
	f := httptest.NewServer(fallback)
	t.Cleanup(f.Close)
	cfg := fmt.Sprintf(baseConfig, "0.9")
	cfg = strings.Replace(cfg, "name = \"fallback\"\n", "name = \"fallback\"\napi_key_env = \"FALLBACK_KEY\"\n", 1)
	env := func(k string) string {
		if k == "FALLBACK_KEY" {
			return "sk-fallback"
		}
		return ""
	}
	r := startEnv(t, env, cfg, p.URL, f.URL)

	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/responses", strings.NewReader(`{"model":"gpt-test","input":"hi","temperature":0}`))
	req.Header.Set("Authorization", "Bearer sk-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"resp_f1"`) {
		t.Fatalf("create with the primary overloaded: %d %s, want the fallback's resp_f1", resp.StatusCode, body)
	}

	for _, id := range []string{"resp_f1", "resp_unknown"} {
		req, _ = http.NewRequest(http.MethodGet, r.url+"/v1/responses/"+id, nil)
		req.Header.Set("Authorization", "Bearer sk-client")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := map[string]int{"resp_f1": http.StatusOK, "resp_unknown": http.StatusNotFound}[id]
		if resp.StatusCode != want {
			t.Errorf("get %s: %d, want %d", id, resp.StatusCode, want)
		}
	}
	if got := fallback.seen(); len(got) != 1 || got[0] != "resp_f1 Bearer sk-fallback" {
		t.Errorf("fallback saw %q, want the GET of resp_f1 with its own key", got)
	}
	if got := primary.seen(); len(got) != 1 || got[0] != "resp_unknown Bearer sk-client" {
		t.Errorf("primary (the default) saw %q, want the unknown id with the client's key", got)
	}
	if s := r.get(t, "/stats"); !strings.Contains(s, `"known_ids":1`) {
		t.Errorf("/stats does not count the learnt id: %s", s)
	}
	if s := r.get(t, "/metrics"); !strings.Contains(s, "\nbreakwater_responses_known_ids 1\n") {
		t.Error("/metrics has no breakwater_responses_known_ids 1")
	}
}
