package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// fakeClaude is a loopback server speaking the Messages API: it answers
// "answer to: <last user text>" (continuing an assistant prefill), as JSON
// or as the API's named event stream, and misbehaves as told.
type fakeClaude struct {
	*httptest.Server
	mu       sync.Mutex
	reqs     []claudeReq
	attempts map[string]int // per question
	// overload decides, per question and 1-based attempt at it, whether to
	// answer 529 overloaded_error (with retryAfter, when not "").
	overload   func(attempt int) bool
	retryAfter string
	// refuse, when set, writes the refusal instead of 529 overloaded_error.
	refuse func(w http.ResponseWriter)
	// work is how long an answer takes (a refusal comes at once).
	work time.Duration
	// cutAfter > 0 ends a stream with an error event after that many text
	// deltas.
	cutAfter int
	// judge, when set, answers the auto judge's requests.
	judge *fakeJudge
}

type claudeReq struct {
	path   string
	header http.Header
	body   map[string]any
	at     time.Time
}

func newFakeClaude(t *testing.T) *fakeClaude {
	f := &fakeClaude{attempts: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeClaude) requests() []claudeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]claudeReq(nil), f.reqs...)
}

// messageCalls counts the POST /v1/messages requests received.
func (f *fakeClaude) messageCalls() int {
	n := 0
	for _, r := range f.requests() {
		if r.path == "/v1/messages" {
			n++
		}
	}
	return n
}

func (f *fakeClaude) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.reqs = append(f.reqs, claudeReq{path: r.URL.Path, header: r.Header.Clone(), body: body, at: time.Now()})
	f.mu.Unlock()
	if f.judge != nil && f.judge.intercept(w, r, body) {
		return
	}
	if r.URL.Path == "/v1/messages/count_tokens" {
		writeJSON(w, 200, map[string]any{"input_tokens": 12})
		return
	}
	if r.URL.Path != "/v1/messages" {
		writeJSON(w, 404, map[string]any{"type": "error", "error": map[string]any{"type": "not_found_error", "message": "no " + r.URL.Path}})
		return
	}
	question, prefill := claudeTurns(body)
	f.mu.Lock()
	f.attempts[question]++
	attempt := f.attempts[question]
	f.mu.Unlock()
	if f.overload != nil && f.overload(attempt) {
		if f.refuse != nil {
			f.refuse(w)
			return
		}
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		writeJSON(w, 529, map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
		return
	}
	time.Sleep(f.work) // the model's time to answer, not synchronisation
	full := "answer to: " + question
	text := full
	if prefill != "" && strings.HasPrefix(full, prefill) {
		text = full[len(prefill):]
	}
	model, _ := body["model"].(string)
	content := []map[string]any{{"type": "text", "text": text}}
	stop := "end_turn"
	if _, ok := body["tools"]; ok {
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_01", "name": "weather",
			"input": map[string]any{"city": "Paris", "days": 3}})
		stop = "tool_use"
	}
	msg := map[string]any{"id": fmt.Sprintf("msg_%d", len(f.requests())), "type": "message", "role": "assistant",
		"model": model, "content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": len(strings.Fields(text)), "cache_read_input_tokens": 0}}
	if stream, _ := body["stream"].(bool); !stream {
		writeJSON(w, 200, msg)
		return
	}
	f.stream(w, msg)
}

// stream sends msg as the API streams it; a text block in word deltas, a
// tool_use block in two input_json_delta fragments.
func (f *fakeClaude) stream(w http.ResponseWriter, msg map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	send := func(typ string, ev map[string]any) {
		ev["type"] = typ
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		fl.Flush()
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 0}
	send("message_start", map[string]any{"message": start})
	send("ping", map[string]any{})
	deltas := 0
	for i, block := range msg["content"].([]map[string]any) {
		switch block["type"] {
		case "text":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, piece := range words(block["text"].(string)) {
				if f.cutAfter > 0 && deltas == f.cutAfter {
					fmt.Fprint(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
					fl.Flush()
					return
				}
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
				deltas++
			}
		case "tool_use":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(block["input"])
			half := len(in) / 2
			send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in[:half])}})
			send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in[half:])}})
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": msg["stop_reason"], "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": msg["usage"].(map[string]any)["output_tokens"]}})
	send("message_stop", map[string]any{})
}

// claudeTurns returns the last user turn's text and the assistant prefill
// after it, if any.
func claudeTurns(body map[string]any) (question, prefill string) {
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		mo, _ := m.(map[string]any)
		text := ""
		switch c := mo["content"].(type) {
		case string:
			text = c
		case []any:
			for _, b := range c {
				if bo, _ := b.(map[string]any); bo["type"] == "text" {
					text += bo["text"].(string)
				}
			}
		}
		if mo["role"] == "user" {
			question, prefill = text, ""
		} else {
			prefill = text
		}
	}
	return question, prefill
}

// claudeEnv is an env whose routes serve Claude models from fake Messages
// upstreams: "claude-test" from a then b, "claude-opus" from a (as
// claude-opus) then b (as claude-sonnet).
type claudeEnv struct {
	*env
	a, b *fakeClaude
}

func newClaudeEnv(t *testing.T, eo envOptions) *claudeEnv {
	t.Helper()
	ce := &claudeEnv{a: newFakeClaude(t), b: newFakeClaude(t)}
	caller := eo.caller
	eo.caller = func(o *upstream.Options) {
		o.Upstreams = append(o.Upstreams,
			upstream.Upstream{Name: "claude-a", BaseURL: ce.a.URL + "/v1", Timeout: 5 * time.Second, MaxConcurrency: 16, MaxQueue: 64},
			upstream.Upstream{Name: "claude-b", BaseURL: ce.b.URL + "/v1", Timeout: 5 * time.Second, MaxConcurrency: 16, MaxQueue: 64})
		o.Routes = append(o.Routes,
			upstream.Route{Name: "claude-test", Targets: []upstream.Target{
				{Upstream: "claude-a", Model: "claude-test", Priority: 0},
				{Upstream: "claude-b", Model: "claude-test", Priority: 1}}},
			upstream.Route{Name: "claude-opus", Targets: []upstream.Target{
				{Upstream: "claude-a", Model: "claude-opus", Priority: 0},
				{Upstream: "claude-b", Model: "claude-sonnet", Priority: 1}}})
		if caller != nil {
			caller(o)
		}
	}
	proxyOpts := eo.proxy
	eo.proxy = func(o *Options) {
		homeUpstream(o, "anthropic", "anthropic", mustURL(t, ce.a.URL+"/v1"))
		if proxyOpts != nil {
			proxyOpts(o)
		}
	}
	ce.env = newEnv(t, eo)
	return ce
}

// sdk is an official Anthropic Go client pointed at the sidecar: today's
// style (Authorization: Bearer, the SDK's own anthropic-version) for a key
// given with bearer, the older one (x-api-key, 2023-06-01) otherwise. The
// SDK's own retries are off, so what the test sees is what Breakwater did.
func (ce *claudeEnv) sdk(key string, bearer bool, opts ...option.RequestOption) anthropic.Client {
	base := []option.RequestOption{option.WithBaseURL(ce.front.URL), option.WithMaxRetries(0)}
	if bearer {
		base = append(base, option.WithAPIKey(key))
	} else {
		base = append(base, option.WithHeader("X-Api-Key", key), option.WithHeader("Anthropic-Version", "2023-06-01"))
	}
	return anthropic.NewClient(append(base, opts...)...)
}

// question is a Messages request for one user turn.
func question(model, text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

// headerTap records the response headers of the last SDK call.
type headerTap struct {
	mu sync.Mutex
	h  http.Header
}

func (ht *headerTap) option() option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		if resp != nil {
			ht.mu.Lock()
			ht.h = resp.Header.Clone()
			ht.mu.Unlock()
		}
		return resp, err
	})
}

func (ht *headerTap) get(name string) string {
	ht.mu.Lock()
	defer ht.mu.Unlock()
	return ht.h.Get(name)
}
