package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
	"github.com/breakwater-dev/breakwater/proxy/wire/apis"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

// echoAPI is a wire API made up for the registration's tests: an exact-only
// JSON endpoint whose errors are {"problem": ...}, claiming the requests
// that carry X-Echo-Version.
var echoAPI = &wire.Format{
	Endpoint: "/v1/echo",
	Key: func(p string, _ http.Header, body []byte, _ func(string) string) (wire.Key, error) {
		obj, err := cache.DecodeObject(body)
		if err != nil {
			return wire.Key{}, err
		}
		return openai.CommonKey(p, "/v1/echo", obj)
	},
	ExactOnly:    true,
	Finished:     json.Valid,
	Usage:        func([]byte) Usage { return Usage{} },
	AnswerText:   func([]byte) string { return "" },
	Replay:       func(io.Writer, func(), []byte, []byte, time.Time) error { return nil },
	NewAssembler: func() StreamAssembler { return nil },
	StreamError:  func(error) []byte { return nil },
	Error: func(status int, code, message string) (int, []byte) {
		b, _ := json.Marshal(map[string]string{"problem": code + ": " + message})
		return status, b
	},
	// ShapeRequest sends the made-up API's calls to the fake model's path.
	ShapeRequest: func(r *upstream.Request) { r.Path = "/v1/chat/completions" },
}

var echoRegistration = wire.API{
	Name:   "echo",
	Errors: echoAPI,
	Claims: func(h http.Header) bool { return h.Get("X-Echo-Version") != "" },
	Routes: []wire.Route{
		{Method: http.MethodPost, Path: "/v1/echo", Format: echoAPI},
		{Method: http.MethodGet, Path: "/v1/echo/home", Handler: func(h wire.Host) echo.HandlerFunc {
			return func(c echo.Context) error { return h.Error(c, http.StatusTeapot, "home", "served by its own handler") }
		}},
	},
}

// An API is one wire.API value added to the list: its route goes through
// the cached flow (a miss, then an exact hit), its handlers through its
// Host, and its errors, and those of the requests it claims, are in its
// own shape while the other APIs keep theirs.
func TestRegisteredAPIIsServed(t *testing.T) {
	e := newEnv(t, envOptions{proxy: func(o *Options) {
		o.APIs = append(append([]wire.API(nil), apis.All...), echoRegistration)
	}})
	body := `{"model":"gpt-test","messages":[{"role":"user","content":"hello echo"}]}`
	first := e.post("/v1/echo", body, "Authorization", "Bearer k1")
	second := e.post("/v1/echo", body, "Authorization", "Bearer k1")
	if first.status != 200 || first.header.Get(HeaderCache) != OutcomeMiss || second.header.Get(HeaderCache) != OutcomeHitExact || string(first.body) != string(second.body) {
		t.Fatalf("the registered route: %d %s then %s (%s / %s)", first.status, first.header.Get(HeaderCache), second.header.Get(HeaderCache), first.body, second.body)
	}
	if r := e.post("/v1/echo", `{"messages":[]}`); r.status != 400 || !strings.Contains(string(r.body), `"problem":"invalid_request: `) {
		t.Errorf("a bad request: %d %s, want 400 in the API's own shape", r.status, r.body)
	}
	if r := e.get("/v1/echo/home"); r.status != http.StatusTeapot || !strings.Contains(string(r.body), `"problem":"home: served by its own handler"`) {
		t.Errorf("the API's own handler: %d %s", r.status, r.body)
	}
	req, _ := http.NewRequest(http.MethodGet, e.front.URL+"/nowhere", nil)
	req.Header.Set("X-Echo-Version", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), `"problem":"not_found`) {
		t.Errorf("a request the API claims: %d %s, want 404 in its shape", resp.StatusCode, b)
	}
	if r := e.get("/nowhere"); r.status != 404 || strings.Contains(string(r.body), "problem") {
		t.Errorf("an unclaimed request: %d %s, want the default API's shape", r.status, r.body)
	}
}

// A registration the server cannot serve is refused at New, naming it.
func TestRegistrationsRefused(t *testing.T) {
	caller, err := upstream.New(upstream.Options{Upstreams: []upstream.Upstream{{Name: "a", BaseURL: "http://127.0.0.1:1/v1"}}, DefaultUpstream: "a"})
	if err != nil {
		t.Fatal(err)
	}
	noDefault := echoRegistration
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"none", Options{}, "no registered API without a Claims"},
		{"twice", Options{APIs: []wire.API{echoRegistration, echoRegistration}}, `API "echo": every registered API needs a name of its own`},
		{"no route kind", Options{APIs: []wire.API{{Name: "x", Errors: echoAPI, Routes: []wire.Route{{Path: "/v1/x"}}}}}, "has neither a Format nor a Handler"},
		{"unknown home", Options{APIs: apis.All, APIUpstreams: map[string]string{"claude": "a"}}, `APIUpstreams names "claude", which is no registered API`},
		{"only claiming", Options{APIs: []wire.API{noDefault}}, "no registered API without a Claims"},
	} {
		tc.opts.Caller = caller
		s, err := New(tc.opts)
		if err == nil {
			s.Close()
			t.Errorf("%s: New accepted it", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want %q", tc.name, err, tc.want)
		}
	}
}
