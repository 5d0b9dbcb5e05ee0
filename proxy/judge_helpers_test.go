package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/lib/judgeprompt"
)

// judgeCall is one judge request a fake upstream received.
type judgeCall struct {
	api, key, model string
	a, b            string // the questions, as the fences hold them ("" when not fenced)
	body            map[string]any
}

// fakeJudge answers the auto judge's requests of every wire API, in the
// API's own shape, as a naive model does (judgeprompt.Naive: it obeys
// anything outside the fences) with truth as its reading of the questions;
// reply, when set, replaces it (status, text; a status 0 waits for the
// client to give up, or the test to end). Other requests go on to the fake's own behaviour.
type fakeJudge struct {
	truth func(a, b string) bool
	reply func(system, user string) (int, string)
	// release ends the waits of a judge told to hang (status 0).
	release chan struct{}
	stop    func()
	mu      sync.Mutex
	calls   []judgeCall
}

// newFakeJudge is a judge whose hanging replies end when the test does: the
// setups register stop after the fake servers, so it runs before they close
// (a server's Close waits for its handlers).
func newFakeJudge(truth func(a, b string) bool) *fakeJudge {
	j := &fakeJudge{truth: truth, release: make(chan struct{})}
	var once sync.Once
	j.stop = func() { once.Do(func() { close(j.release) }) }
	return j
}

func (j *fakeJudge) seen() []judgeCall {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]judgeCall(nil), j.calls...)
}

// judgePrompt finds a judge request of any of the four APIs in body.
func judgePrompt(path string, body map[string]any) (api, system, user string, ok bool) {
	str := func(v any) string { s, _ := v.(string); return s }
	text := func(v any) string { // Gemini's {"parts":[{"text"}]}
		c, _ := v.(map[string]any)
		parts, _ := c["parts"].([]any)
		if len(parts) == 0 {
			return ""
		}
		p, _ := parts[0].(map[string]any)
		return str(p["text"])
	}
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		msgs, _ := body["messages"].([]any)
		if len(msgs) == 2 {
			m0, _ := msgs[0].(map[string]any)
			m1, _ := msgs[1].(map[string]any)
			api, system, user = "chat", str(m0["content"]), str(m1["content"])
		}
	case strings.HasSuffix(path, "/responses"):
		api, system, user = "responses", str(body["instructions"]), str(body["input"])
	case strings.HasSuffix(path, "/messages"):
		msgs, _ := body["messages"].([]any)
		if len(msgs) == 1 {
			m0, _ := msgs[0].(map[string]any)
			api, system, user = "messages", str(body["system"]), str(m0["content"])
		}
	case strings.Contains(path, ":generateContent"):
		contents, _ := body["contents"].([]any)
		if len(contents) == 1 {
			api, system, user = "gemini", text(body["systemInstruction"]), text(contents[0])
		}
	}
	return api, system, user, strings.Contains(system, "<question-A-")
}

// intercept answers r when body is a judge request.
func (j *fakeJudge) intercept(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
	api, system, user, ok := judgePrompt(r.URL.Path, body)
	if !ok {
		return false
	}
	key := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key")
	model, _ := body["model"].(string)
	if api == "gemini" {
		model, _, _ = strings.Cut(strings.TrimPrefix(r.URL.Path[strings.LastIndex(r.URL.Path, "/models/"):], "/models/"), ":")
	}
	a, b, _ := judgeprompt.Read(user)
	j.mu.Lock()
	j.calls = append(j.calls, judgeCall{api: api, key: key, model: model, a: a, b: b, body: body})
	j.mu.Unlock()
	status, text := http.StatusOK, ""
	if j.reply != nil {
		status, text = j.reply(system, user)
	} else {
		text = judgeprompt.Naive(system, user, j.truth)
	}
	switch {
	case status == 0:
		select {
		case <-r.Context().Done():
		case <-j.release:
		}
		return true
	case status != http.StatusOK:
		writeJSON(w, status, map[string]any{"error": map[string]any{"message": "judge failed", "type": "server_error"}})
		return true
	}
	switch api {
	case "chat":
		writeJSON(w, 200, completion(body, text))
	case "responses":
		writeJSON(w, 200, map[string]any{"id": "resp_judge", "object": "response", "created_at": 1700000000, "status": "completed", "model": model,
			"output": []any{map[string]any{"type": "message", "id": "msg_judge", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}},
			"usage": map[string]any{"input_tokens": 90, "output_tokens": 6, "total_tokens": 96}})
	case "messages":
		writeJSON(w, 200, map[string]any{"id": "msg_judge", "type": "message", "role": "assistant", "model": model,
			"content": []any{map[string]any{"type": "text", "text": text}}, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 90, "output_tokens": 6}})
	case "gemini":
		writeJSON(w, 200, geminiAnswer(model, text, "STOP"))
	}
	return true
}

// judgeVerifier is the auto judge's verifier as internal/app builds it on
// defaults (a candidate without a verdict is a miss), judging from min.
func judgeVerifier(t *testing.T, min float32, timeout time.Duration) *verify.Verifier {
	t.Helper()
	v, err := verify.New(verify.Options{Judge: verify.Auto{}, MinSimilarity: min, Timeout: timeout, NoVerdictMiss: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

// withAutoJudge sets eo up with the auto judge (v) in the cache and proxy.
func withAutoJudge(eo *envOptions, v *verify.Verifier) {
	inner := eo.proxy
	eo.proxy = func(o *Options) {
		o.Verify = &Verify{Estimator: verify.NewEstimator(nil, nil), Judge: v, Auto: true}
		if inner != nil {
			inner(o)
		}
	}
	eo.cacheOpts = func(co *cache.Options) { co.Verifier = v }
}

// judgeAPI is one wire API in the judge tests: ask sends a question with key
// through the API's official SDK and returns X-Breakwater-Cache.
type judgeAPI struct {
	name  string
	setup func(t *testing.T, eo envOptions, j *fakeJudge) (e *env, ask func(key, q string) (string, error))
}

var judgeAPIs = []judgeAPI{
	{"chat", func(t *testing.T, eo envOptions, j *fakeJudge) (*env, func(string, string) (string, error)) {
		e := newEnv(t, eo)
		t.Cleanup(j.stop)
		e.model.HandleFunc = j.intercept
		return e, func(key, q string) (string, error) {
			c := openai.NewClient(option.WithBaseURL(e.front.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
			var raw *http.Response
			_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "gpt-test", Temperature: openai.Float(0),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)},
			}, option.WithResponseInto(&raw))
			return outcomeOf(raw), err
		}
	}},
	{"responses", func(t *testing.T, eo envOptions, j *fakeJudge) (*env, func(string, string) (string, error)) {
		e := newEnv(t, eo)
		t.Cleanup(j.stop)
		newFakeResponses().install(e)
		own := e.model.HandleFunc
		e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
			return j.intercept(w, r, body) || own(w, r, body)
		}
		return e, func(key, q string) (string, error) {
			var raw *http.Response
			p := ask(q)
			p.Temperature = openai.Float(0)
			c := responsesClient(e, key)
			_, err := c.Responses.New(context.Background(), p, option.WithResponseInto(&raw))
			return outcomeOf(raw), err
		}
	}},
	{"messages", func(t *testing.T, eo envOptions, j *fakeJudge) (*env, func(string, string) (string, error)) {
		ce := newClaudeEnv(t, eo)
		t.Cleanup(j.stop)
		ce.a.judge = j
		return ce.env, func(key, q string) (string, error) {
			var raw *http.Response
			p := question("claude-test", q)
			c := ce.sdk(key, true)
			_, err := c.Messages.New(context.Background(), p, aoption.WithResponseInto(&raw))
			return outcomeOf(raw), err
		}
	}},
	{"gemini", func(t *testing.T, eo envOptions, j *fakeJudge) (*env, func(string, string) (string, error)) {
		g := newGeminiEnv(t, eo)
		t.Cleanup(j.stop)
		g.api.handle = func(w http.ResponseWriter, c geminiCall, _ int) bool {
			r, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "/v1beta/models/"+c.model+":"+c.method, nil)
			r.Header.Set("X-Goog-Api-Key", c.key)
			return c.method == "generateContent" && j.intercept(w, r, c.body)
		}
		return g.env, func(key, q string) (string, error) {
			resp, err := g.client(key).Models.GenerateContent(context.Background(), geminiFlash, genai.Text(q), zeroTemp())
			if err != nil {
				return "", err
			}
			return resp.SDKHTTPResponse.Headers.Get(HeaderCache), nil
		}
	}},
}

// outcomeOf is X-Breakwater-Cache of an SDK's raw response ("" without one).
func outcomeOf(raw *http.Response) string {
	if raw == nil {
		return ""
	}
	return raw.Header.Get(HeaderCache)
}
