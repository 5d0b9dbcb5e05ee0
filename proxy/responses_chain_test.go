package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// responsesLog records the Responses requests an upstream received.
type responsesLog struct {
	mu    sync.Mutex
	calls []map[string]any
}

func (l *responsesLog) add(body map[string]any) {
	l.mu.Lock()
	l.calls = append(l.calls, body)
	l.mu.Unlock()
}

// count is how many recorded requests pass keep.
func (l *responsesLog) count(keep func(body map[string]any) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range l.calls {
		if keep(b) {
			n++
		}
	}
	return n
}

func chained(b map[string]any) bool { _, ok := b["previous_response_id"]; return ok }

// TestResponsesChainStaysOnUpstream: a Responses request naming
// previous_response_id continues a response only the upstream that stored it
// holds. With that upstream overloaded (503 or 529 on every create), the chained
// request may fall back to another model on the same upstream, never to the
// backup upstream, and the SDK gets the error in OpenAI's shape; a request
// without previous_response_id falls back to the backup and is answered.
func TestResponsesChainStaysOnUpstream(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, 529} {
		t.Run("status-"+strconv.Itoa(status), func(t *testing.T) { testChainStaysOnUpstream(t, status) })
	}
}

func testChainStaysOnUpstream(t *testing.T, status int) {
	backupModel := &fakeModel{}
	backupResponses := newFakeResponses()
	backupResponses.prefix = "backup" // two accounts never issue the same id
	backupResponses.install(&env{model: backupModel})
	var backup responsesLog
	serveBackup := backupModel.HandleFunc
	backupModel.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if r.URL.Path == "/v1/responses" {
			backup.add(body)
		}
		return serveBackup(w, r, body)
	}
	backupSrv := httptest.NewServer(backupModel)
	t.Cleanup(backupSrv.Close)

	e := newEnv(t, envOptions{caller: func(o *upstream.Options) {
		o.Upstreams = append(o.Upstreams, upstream.Upstream{Name: "backup", BaseURL: backupSrv.URL + "/v1", MaxConcurrency: 16, MaxQueue: 16})
		o.Routes = []upstream.Route{{Name: "gpt-test", Targets: []upstream.Target{
			{Upstream: "fake", Model: "gpt-test", Priority: 0},
			{Upstream: "fake", Model: "gpt-test-mini", Priority: 1},
			{Upstream: "backup", Model: "gpt-test", Priority: 2},
		}}}
	}})
	primary := newFakeResponses()
	primary.install(e)
	var overloaded atomic.Bool
	var primaryLog responsesLog
	servePrimary := e.model.HandleFunc
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if r.URL.Path == "/v1/responses" {
			primaryLog.add(body)
			if overloaded.Load() {
				writeJSON(w, status, map[string]any{"error": map[string]any{
					"message": "The server is overloaded or not ready yet.", "type": "server_error", "code": nil}})
				return true
			}
		}
		return servePrimary(w, r, body)
	}
	c := responsesClient(e, "sk-tenant-a")
	first, _ := create(t, c, ask("Tell me about lions."))
	overloaded.Store(true)

	_, err := c.Responses.New(context.Background(), followUp(first.ID, "Why do they hunt at night?"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode < 429 || apiErr.Message == "" || apiErr.Type == "" {
		t.Fatalf("chained request with its upstream overloaded: %v, want the error in OpenAI's shape", err)
	}
	if !strings.Contains(apiErr.Message, "bound to upstream fake") {
		t.Errorf("chained request's error: %d %q, want it to say why the backup was not tried", apiErr.StatusCode, apiErr.Message)
	}
	if n := backup.count(chained); n != 0 {
		t.Errorf("backup upstream received %d requests carrying previous_response_id, want 0", n)
	}
	mini := primaryLog.count(func(b map[string]any) bool { return chained(b) && b["model"] == "gpt-test-mini" })
	if mini == 0 {
		t.Error("the chained request did not fall back to the other model on the same upstream")
	}

	// The same overload without a chain falls back to the backup upstream.
	r, err := c.Responses.New(context.Background(), ask("Tell me about owls."))
	if err != nil {
		t.Fatalf("unchained request with the primary overloaded: %v, want the backup's answer", err)
	}
	if !strings.Contains(r.OutputText(), "owls") {
		t.Errorf("unchained answer = %q", r.OutputText())
	}
	if n := backup.count(func(map[string]any) bool { return true }); n != 1 {
		t.Errorf("backup upstream received %d requests, want 1 (the unchained one)", n)
	}

	// Streamed, the chained request stays on its upstream as well.
	if _, err := createStream(t, c, followUp(first.ID, "And where do they sleep?")); !errors.As(err, &apiErr) {
		t.Errorf("chained stream with its upstream overloaded: %v, want an API error", err)
	}
	if n := backup.count(chained); n != 0 {
		t.Errorf("backup upstream received %d streamed requests carrying previous_response_id, want 0", n)
	}
}

// TestResponsesBoundToUpstream reads previous_response_id and conversation
// by their exact names; null binds nothing.
func TestResponsesBoundToUpstream(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","input":"x","previous_response_id":"resp_1"}`: true,
		`{"model":"m","input":"x","conversation":"conv_1"}`:         true,
		`{"model":"m","input":"x","previous_response_id":null}`:     false,
		`{"model":"m","input":"x","Previous_Response_Id":"resp_1"}`: false,
		`{"model":"m","input":"x"}`:                                 false,
		`not json`:                                                  false,
	} {
		if got, _ := (responsesAPI{}).BoundToUpstream([]byte(body)); got != want {
			t.Errorf("boundToUpstream(%s) = %v, want %v", body, got, want)
		}
	}
}
