package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// twoModels builds an env where "gpt-test" goes to the env's model and
// "cheap" to a second upstream, so a request routed by the wrong field shows.
func twoModels(t *testing.T) (*env, *fakeModel) {
	t.Helper()
	cheap := &fakeModel{}
	url := httptestServer(t, cheap)
	e := newEnv(t, envOptions{caller: func(o *upstream.Options) {
		o.Upstreams = append(o.Upstreams, upstream.Upstream{Name: "cheap", BaseURL: url + "/v1", Timeout: 5 * time.Second})
		o.Routes = append(o.Routes, upstream.Route{Name: "cheap", Targets: []upstream.Target{{Upstream: "cheap", Model: "cheap"}}})
	}})
	return e, cheap
}

// TestRoutingUsesExactFieldNames is finding 7 of the hardening audit: a
// streamed {"model":"gpt","MODEL":"cheap"} was routed by MODEL (a second,
// case-insensitive struct decode) while the key used model.
func TestRoutingUsesExactFieldNames(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "json"}[stream], func(t *testing.T) {
			e, cheap := twoModels(t)
			body := `{"model":"gpt-test","MODEL":"cheap","Stream":false,"stream":` + map[bool]string{true: "true", false: "false"}[stream] +
				`,"messages":[{"role":"user","content":"which model answers?"}]}`
			r := e.post("/v1/chat/completions", body)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if got := cheap.calls.Load(); got != 0 {
				t.Errorf("the MODEL route got %d calls, want 0", got)
			}
			if got := e.model.calls.Load(); got != 1 {
				t.Errorf("the model route got %d calls, want 1", got)
			}
			if stream != strings.Contains(string(r.body), "data: ") {
				t.Errorf("stream = %v but body is %.80s", stream, r.body)
			}
			// The upstream receives the client's bytes: its own decoding of
			// "model" is the one the key and the route used.
			var sent map[string]any
			if err := json.Unmarshal(e.model.lastBody(), &sent); err != nil || sent["model"] != "gpt-test" {
				t.Errorf("forwarded model = %v (%v)", sent["model"], err)
			}
		})
	}
}

// TestBadKeysAre400 is finding 6: lone surrogate escapes decoded to U+FFFD
// and shared one exact key with an escaped U+FFFD. Now they are refused with
// an OpenAI-shaped 400 before anything is cached or sent, and a duplicate
// field (which the key, the route and the upstream could each read
// differently) is refused too.
func TestBadKeysAre400(t *testing.T) {
	e := newEnv(t, envOptions{})
	ok := e.post("/v1/chat/completions", chat(`zz`+"\ufffd"+`zz`))
	if ok.status != http.StatusOK {
		t.Fatalf("U+FFFD: status %d: %s", ok.status, ok.body)
	}
	for _, body := range []string{
		`{"model":"gpt-test","messages":[{"role":"user","content":"zz\ud800zz"}]}`,
		`{"model":"gpt-test","messages":[{"role":"user","content":"zz\udc00zz"}]}`,
		`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"zz\ud800zz"}]}`,
		`{"model":"gpt-test","model":"cheap","messages":[{"role":"user","content":"zz"}]}`,
		"{\"model\":\"gpt-test\",\"messages\":[{\"role\":\"user\",\"content\":\"zz\xed\xa0\x80zz\"}]}",
	} {
		r := e.post("/v1/chat/completions", body)
		var ae apiError
		if r.status != http.StatusBadRequest || json.Unmarshal(r.body, &ae) != nil || ae.Error.Type != "invalid_request_error" || ae.Error.Message == "" {
			t.Errorf("%q: status %d body %s, want an OpenAI-shaped 400", body, r.status, r.body)
		}
		if r.header.Get(HeaderCache) == OutcomeHitExact {
			t.Errorf("%q was served the U+FFFD entry", body)
		}
	}
	if got := e.model.calls.Load(); got != 1 {
		t.Errorf("upstream calls = %d, want 1 (refused bodies never leave)", got)
	}
}
