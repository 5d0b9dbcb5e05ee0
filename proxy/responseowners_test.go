package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/breakwater-dev/breakwater/proxy/flow"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// requestLog records what one upstream received: method, path and
// Authorization.
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) add(r *http.Request) {
	l.mu.Lock()
	l.seen = append(l.seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	l.mu.Unlock()
}

// count is how many recorded requests contain every one of parts.
func (l *requestLog) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, s := range l.seen {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// ownersEnv is the fallback at peak: route gpt-test goes to upstream "fake"
// (A, the default, holding no key) first and to "backup" (B, holding its own
// key) second; A answers 529 to every create while overloaded.
type ownersEnv struct {
	e          *env
	a, b       *fakeResponses
	aLog, bLog *requestLog
	overloaded *atomic.Bool
}

func newOwnersEnv(t *testing.T) *ownersEnv {
	t.Helper()
	o := &ownersEnv{a: newFakeResponses(), b: newFakeResponses(), aLog: &requestLog{}, bLog: &requestLog{}, overloaded: &atomic.Bool{}}
	o.a.prefix, o.b.prefix = "a", "b"
	bModel := &fakeModel{}
	o.b.install(&env{model: bModel})
	serveB := bModel.HandleFunc
	bModel.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		o.bLog.add(r)
		return serveB(w, r, body)
	}
	bSrv := httptest.NewServer(bModel)
	t.Cleanup(bSrv.Close)
	o.e = newEnv(t, envOptions{
		caller: func(uo *upstream.Options) {
			uo.Upstreams = append(uo.Upstreams, upstream.Upstream{Name: "backup", BaseURL: bSrv.URL + "/v1", APIKey: "sk-upstream-b", MaxConcurrency: 16, MaxQueue: 16})
			uo.Routes = []upstream.Route{{Name: "gpt-test", Targets: []upstream.Target{
				{Upstream: "fake", Model: "gpt-test", Priority: 0},
				{Upstream: "backup", Model: "gpt-test", Priority: 1},
			}}}
		},
		proxy: func(po *Options) {
			// "fake" is left out: its ids go to Passthrough, which is it.
			po.Upstreams = map[string]PassthroughTarget{"backup": {Root: mustURL(t, bSrv.URL+"/v1"), Key: "sk-upstream-b"}}
		},
	})
	o.a.install(o.e)
	serveA := o.e.model.HandleFunc
	o.e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		o.aLog.add(r)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/responses" && o.overloaded.Load() {
			writeJSON(w, 529, map[string]any{"error": map[string]any{
				"message": "The server is overloaded or not ready yet.", "type": "server_error", "code": nil}})
			return true
		}
		return serveA(w, r, body)
	}
	return o
}

// TestResponsesIDFollowsItsUpstream: a response created by the fallback
// upstream B while A was overloaded is retrieved, listed, cancelled, chained
// and deleted at B, with B's key, even once A (the route's first target and
// the default upstream) is healthy again. An id this process never saw goes
// to the default upstream as before, with the client's own key.
func TestResponsesIDFollowsItsUpstream(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) { testIDFollowsUpstream(t, stream) })
	}
}

func testIDFollowsUpstream(t *testing.T, stream bool) {
	o := newOwnersEnv(t)
	c := responsesClient(o.e, "sk-tenant-a")
	ctx := context.Background()

	o.overloaded.Store(true)
	var id string
	if stream {
		s, err := createStream(t, c, ask("Tell me about lions."))
		if err != nil {
			t.Fatalf("streamed create with A overloaded: %v", err)
		}
		id = s.final.ID
	} else {
		r, _ := create(t, c, ask("Tell me about lions."))
		id = r.ID
	}
	if id != "resp_b1" || o.aLog.count("POST /v1/responses") == 0 {
		t.Fatalf("create with A overloaded answered %q (A saw %d creates), want B's resp_b1 after A's 529", id, o.aLog.count("POST /v1/responses"))
	}
	o.overloaded.Store(false)
	refused := o.aLog.count("POST /v1/responses ")

	got, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.ID != id {
		t.Fatalf("get %s: %v (%v), want B's stored response", id, err, got)
	}
	if _, err := c.Responses.InputItems.List(ctx, id, responses.InputItemListParams{}); err != nil {
		t.Errorf("input items of %s: %v", id, err)
	}
	next, err := c.Responses.New(ctx, followUp(id, "Why do they hunt at night?"))
	if err != nil || !strings.Contains(next.OutputText(), "(after "+id+")") || !strings.HasPrefix(next.ID, "resp_b") {
		t.Fatalf("next turn after %s: %v (%v), want B's answer continuing it", id, err, next)
	}
	cancelled, err := c.Responses.Cancel(ctx, id)
	if err != nil || cancelled.Status != "cancelled" {
		t.Errorf("cancel %s: %v (%v)", id, err, cancelled)
	}
	if err := c.Responses.Delete(ctx, id); err != nil {
		t.Errorf("delete %s: %v", id, err)
	}
	if n := o.aLog.count("/v1/responses/"); n != 0 {
		t.Errorf("A received %d requests by id, want 0 (the id lives on B)", n)
	}
	if n := o.aLog.count("POST /v1/responses ") - refused; n != 0 {
		t.Errorf("A received %d creates once healthy, want 0 (the next turn belongs to B)", n)
	}
	for _, want := range []string{"GET /v1/responses/" + id + " ", "GET /v1/responses/" + id + "/input_items", "POST /v1/responses/" + id + "/cancel", "DELETE /v1/responses/" + id + " "} {
		if n := o.bLog.count(want, "Bearer sk-upstream-b"); n != 1 {
			t.Errorf("B received %d of %q with its own key, want 1", n, want)
		}
	}
	if n := o.bLog.count("POST /v1/responses ", "Bearer sk-upstream-b"); n != 2 {
		t.Errorf("B received %d creates with its own key, want 2 (the fallback and the next turn)", n)
	}
	if n := o.bLog.count("sk-tenant-a"); n != 0 {
		t.Errorf("B received the client's key %d times, want never (it holds its own)", n)
	}

	// An id this process never saw: the default upstream, the client's key.
	_, err = c.Responses.Get(ctx, "resp_elsewhere", responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("get of an unknown id: %v, want the default upstream's 404", err)
	}
	if n := o.aLog.count("GET /v1/responses/resp_elsewhere", "Bearer sk-tenant-a"); n != 1 {
		t.Errorf("A received %d GETs of the unknown id with the client's key, want 1", n)
	}
	if n := o.bLog.count("resp_elsewhere"); n != 0 {
		t.Errorf("B received %d requests for the unknown id, want 0", n)
	}

	// /stats counts the ids learnt: the fallback's and the next turn's.
	r := o.e.get("/stats")
	var st struct {
		Responses struct {
			KnownIDs int `json:"known_ids"`
		} `json:"responses"`
	}
	if err := json.Unmarshal(r.body, &st); err != nil || st.Responses.KnownIDs != 2 {
		t.Errorf("/stats responses.known_ids = %d (%v), want 2", st.Responses.KnownIDs, err)
	}
}

// A response created by the default upstream is served there, as before,
// also when that upstream has no entry of its own in Options.Upstreams.
func TestResponsesIDOnDefaultUpstream(t *testing.T) {
	o := newOwnersEnv(t)
	c := responsesClient(o.e, "sk-tenant-a")
	r, _ := create(t, c, ask("Tell me about owls."))
	if r.ID != "resp_a1" {
		t.Fatalf("create with A healthy answered %q, want A's resp_a1", r.ID)
	}
	if _, err := c.Responses.Get(context.Background(), r.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("get %s: %v", r.ID, err)
	}
	if n := o.aLog.count("GET /v1/responses/resp_a1", "Bearer sk-tenant-a"); n != 1 {
		t.Errorf("A received %d GETs of its id with the client's key, want 1", n)
	}
	if n := o.bLog.count("/v1/responses"); n != 0 {
		t.Errorf("B received %d requests, want 0", n)
	}
}

// A background request continuing B's response passes through uncached to
// B, not to the default upstream, and the id of the queued response B
// answers is learnt from the pass-through, so polling it reaches B too.
func TestResponsesBackgroundFollowsItsUpstream(t *testing.T) {
	o := newOwnersEnv(t)
	c := responsesClient(o.e, "sk-tenant-a")
	ctx := context.Background()
	o.overloaded.Store(true)
	first, _ := create(t, c, ask("Tell me about lions."))
	o.overloaded.Store(false)
	refused := o.aLog.count("POST /v1/responses ")

	bg := followUp(first.ID, "Think about it for a while.")
	bg.Background = openai.Bool(true)
	queued, outcome := create(t, c, bg)
	if queued.Status != "queued" || outcome != OutcomeBypass || !strings.HasPrefix(queued.ID, "resp_b") {
		t.Fatalf("background request after %s: %q %q %q, want B's queued response passed through", first.ID, queued.ID, queued.Status, outcome)
	}
	if got, err := c.Responses.Get(ctx, queued.ID, responses.ResponseGetParams{}); err != nil || got.ID != queued.ID {
		t.Fatalf("poll %s: %v (%v), want B's response", queued.ID, err, got)
	}
	if n := o.aLog.count("POST /v1/responses ") - refused; n != 0 {
		t.Errorf("A received %d creates once healthy, want 0", n)
	}
	if n := o.aLog.count("/v1/responses/"); n != 0 {
		t.Errorf("A received %d requests by id, want 0", n)
	}
	if n := o.bLog.count("GET /v1/responses/"+queued.ID, "Bearer sk-upstream-b"); n != 1 {
		t.Errorf("B received %d polls of %s with its key, want 1", n, queued.ID)
	}
}

// learnPassedThrough reads the id of a gzip-encoded answer (the client's
// Accept-Encoding is forwarded as sent) and hands the client the same bytes.
func TestLearnPassedThroughGzip(t *testing.T) {
	s := &Server{idFormats: []Format{responsesFormat}}
	const body = `{"id":"resp_z1","object":"response","status":"queued"}`
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte(body))
	_ = zw.Close()
	wire := append([]byte(nil), zb.Bytes()...)
	for _, tc := range []struct {
		name, method, path, encoding string
		status                       int
		raw                          []byte
		learnt                       bool
	}{
		{"gzip", http.MethodPost, "/v1/responses", "gzip", 200, wire, true},
		{"plain", http.MethodPost, "/v1/responses", "", 200, []byte(body), true},
		{"error status", http.MethodPost, "/v1/responses", "", 400, []byte(body), false},
		{"cancel", http.MethodPost, "/v1/responses/resp_z1/cancel", "", 200, []byte(body), false},
		{"other encoding", http.MethodPost, "/v1/responses", "br", 200, []byte(body), false},
	} {
		s.flow, _ = flow.New(flow.Options{})
		req := httptest.NewRequest(tc.method, "http://up.example"+tc.path, nil)
		resp := &http.Response{StatusCode: tc.status, Request: req, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(tc.raw))}
		if tc.encoding != "" {
			resp.Header.Set("Content-Encoding", tc.encoding)
		}
		s.learnPassedThrough(resp, "b")
		if _, ok := s.flow.Owners().Lookup(nil, "resp_z1"); ok != tc.learnt {
			t.Errorf("%s: learnt %v, want %v", tc.name, ok, tc.learnt)
		}
		if got, _ := io.ReadAll(resp.Body); !bytes.Equal(got, tc.raw) {
			t.Errorf("%s: the client gets %q, want the upstream's bytes", tc.name, got)
		}
	}
}

// BenchmarkResponseIDLearn is what a Responses miss adds to learn its id:
// reading the answer's top-level "id" (a 1,000-word answer), beside the
// Finished check that every stored answer already pays.
func BenchmarkResponseIDLearn(b *testing.B) {
	// In the API's own field order (id and object first).
	body := []byte(`{"id":"resp_` + strings.Repeat("0a", 24) + `","object":"response","created_at":1700000000,` +
		`"status":"completed","error":null,"incomplete_details":null,"model":"gpt-test","output":[{"id":"msg_1",` +
		`"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` +
		strings.Repeat("word ", 1000) + `","annotations":[]}]}],"usage":{"input_tokens":5,"output_tokens":1000,"total_tokens":1005}}`)
	for _, bc := range []struct {
		name string
		f    func() bool
	}{
		{"responseID", func() bool { return responsesAPI{}.ResponseID(body) != "" }},
		{"Finished", func() bool { return responsesAPI{}.Finished(body) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if !bc.f() {
					b.Fatal("not read")
				}
			}
		})
	}
}

// responseID reads a response's id by its exact name, from response objects
// only.
func TestResponseID(t *testing.T) {
	for body, want := range map[string]string{
		`{"id":"resp_1","object":"response","status":"completed"}`:      "resp_1",
		`{"object":"response","output":[{"id":"msg_1"}],"id":"resp_2"}`: "resp_2",
		`{"id":"resp_3","status":"queued"}`:                             "resp_3",
		`{"id":"resp_4","object":"response.deleted"}`:                   "",
		`{"error":{"message":"nope","type":"invalid_request_error"}}`:   "",
		`{"ID":"resp_5","object":"response"}`:                           "",
		`{"id":5,"object":"response"}`:                                  "",
		`{"id":"resp_6","id":"resp_7","object":"response"}`:             "",
		`[{"id":"resp_8"}]`:                                             "",
		`not json`:                                                      "",
	} {
		if got := (responsesAPI{}).ResponseID([]byte(body)); got != want {
			t.Errorf("responseID(%s) = %q, want %q", body, got, want)
		}
	}
}
