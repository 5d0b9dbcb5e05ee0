package proxy

import (
	"context"
	"encoding/json"
	"fmt"
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

// Models of the Gemini test routes: Pro falls back to Flash.
const (
	geminiPro   = "gemini-3-pro-preview"
	geminiFlash = "gemini-2.5-flash"
)

// geminiCall is one request as the fake Gemini API received it.
type geminiCall struct {
	model, method string
	query         string // raw query as received
	key           string // x-goog-api-key
	body          map[string]any
	at            time.Time
}

// fakeGemini is a loopback server speaking the Gemini API
// (/v1beta/models/{model}:{method}); it answers deterministically from the
// last user text and can be told to misbehave per call.
type fakeGemini struct {
	mu    sync.Mutex
	calls []geminiCall
	// handle answers instead of the default when it returns true; n is the
	// 1-based number of calls for this model.
	handle func(w http.ResponseWriter, c geminiCall, n int) bool
}

func (f *fakeGemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	if r.URL.Path == "/v1beta/models" {
		f.mu.Lock()
		f.calls = append(f.calls, geminiCall{method: "list", query: r.URL.RawQuery, key: r.Header.Get("X-Goog-Api-Key"), at: time.Now()})
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"models": []any{map[string]any{"name": "models/" + geminiFlash}}})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if !ok {
		writeJSON(w, 404, map[string]any{"error": map[string]any{"code": 404, "message": "no such path " + r.URL.Path, "status": "NOT_FOUND"}})
		return
	}
	model, method, _ := strings.Cut(rest, ":")
	c := geminiCall{model: model, method: method, query: r.URL.RawQuery, key: r.Header.Get("X-Goog-Api-Key"), body: body, at: time.Now()}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	n := 0
	for _, x := range f.calls {
		if x.model == model {
			n++
		}
	}
	handle := f.handle
	f.mu.Unlock()
	if handle != nil && handle(w, c, n) {
		return
	}
	switch method {
	case "countTokens":
		writeJSON(w, 200, map[string]any{"totalTokens": 7})
	case "generateContent":
		writeJSON(w, 200, geminiAnswer(model, c.answer(), "STOP"))
	case "streamGenerateContent":
		geminiStreamAnswer(w, model, c.answer(), len(words(c.answer())))
	default:
		writeJSON(w, 404, map[string]any{"error": map[string]any{"code": 404, "message": "no method " + method, "status": "NOT_FOUND"}})
	}
}

// answer is what the fake model says: its name and the question.
func (c geminiCall) answer() string { return c.model + " says: " + c.lastUser() }

func (c geminiCall) lastUser() string {
	contents, _ := c.body["contents"].([]any)
	for i := len(contents) - 1; i >= 0; i-- {
		co, _ := contents[i].(map[string]any)
		if role, _ := co["role"].(string); role != "" && role != "user" {
			continue
		}
		parts, _ := co["parts"].([]any)
		var texts []string
		for _, p := range parts {
			if s, ok := p.(map[string]any)["text"].(string); ok {
				texts = append(texts, s)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

func (f *fakeGemini) callsTo(model string) []geminiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []geminiCall
	for _, c := range f.calls {
		if model == "" || c.model == model {
			out = append(out, c)
		}
	}
	return out
}

func geminiAnswer(model, text, finish string) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"parts": []any{map[string]any{"text": text}}, "role": "model"},
			"finishReason": finish, "index": 0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 4, "candidatesTokenCount": 5, "totalTokenCount": 9},
		"modelVersion":  model,
		"responseId":    "resp-" + model,
	}
}

// geminiStreamAnswer writes text as the API streams it, framed with CRLF,
// one word per event; after upTo words it stops (upTo below the word count
// cuts the stream: the body ends with no finishReason).
func geminiStreamAnswer(w http.ResponseWriter, model, text string, upTo int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	ws := words(text)
	for i, piece := range ws {
		if i == upTo {
			return
		}
		cand := map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": piece}}, "role": "model"}, "index": 0}
		ev := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": "resp-" + model}
		if i == len(ws)-1 {
			cand["finishReason"] = "STOP"
			ev["usageMetadata"] = map[string]any{"promptTokenCount": 4, "candidatesTokenCount": len(ws), "totalTokenCount": 4 + len(ws)}
		}
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		fl.Flush()
	}
}

// geminiRefuse answers status with a Google error body.
func geminiRefuse(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

type geminiEnv struct {
	*env
	api *fakeGemini
}

// newGeminiEnv is a sidecar whose Gemini upstream is a fakeGemini: Pro
// falls back to Flash, Flash stands alone.
func newGeminiEnv(t *testing.T, eo envOptions) *geminiEnv {
	t.Helper()
	api := &fakeGemini{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	innerProxy := eo.proxy
	eo.proxy = func(o *Options) {
		homeUpstream(o, "gemini", "gemini", mustURL(t, srv.URL+"/v1beta"))
		if innerProxy != nil {
			innerProxy(o)
		}
	}
	inner := eo.caller
	eo.caller = func(o *upstream.Options) {
		o.Upstreams = append(o.Upstreams, upstream.Upstream{Name: "gemini", BaseURL: srv.URL + "/v1beta", Timeout: 5 * time.Second, MaxConcurrency: 16, MaxQueue: 16})
		o.Routes = append(o.Routes,
			upstream.Route{Name: geminiPro, Targets: []upstream.Target{
				{Upstream: "gemini", Model: geminiPro, Priority: 0},
				{Upstream: "gemini", Model: geminiFlash, Priority: 1},
			}},
			upstream.Route{Name: geminiFlash, Targets: []upstream.Target{{Upstream: "gemini", Model: geminiFlash}}},
		)
		o.Retry = upstream.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Deadline: 10 * time.Second}
		if inner != nil {
			inner(o)
		}
	}
	return &geminiEnv{env: newEnv(t, eo), api: api}
}

// client is the official Go SDK pointed at the sidecar with key.
func (g *geminiEnv) client(key string) *genai.Client {
	g.t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: g.front.URL},
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// zeroTemp asks for deterministic answers (cached under any max_temperature).
func zeroTemp() *genai.GenerateContentConfig {
	return &genai.GenerateContentConfig{Temperature: genai.Ptr[float32](0)}
}

// generate asks model through the SDK and returns the answer's text and
// X-Breakwater-Cache.
func (g *geminiEnv) generate(c *genai.Client, model, question string) (string, string, error) {
	resp, err := c.Models.GenerateContent(context.Background(), model, genai.Text(question), zeroTemp())
	if err != nil {
		return "", "", err
	}
	outcome := ""
	if resp.SDKHTTPResponse != nil {
		outcome = resp.SDKHTTPResponse.Headers.Get(HeaderCache)
	}
	return resp.Text(), outcome, nil
}

// stream asks model for a stream through the SDK and returns the text of
// every chunk joined, the number of chunks, X-Breakwater-Cache and the first
// error the SDK raised.
func (g *geminiEnv) stream(c *genai.Client, model, question string) (text string, chunks int, outcome string, err error) {
	var b strings.Builder
	for resp, err := range c.Models.GenerateContentStream(context.Background(), model, genai.Text(question), zeroTemp()) {
		if err != nil {
			return b.String(), chunks, outcome, err
		}
		chunks++
		b.WriteString(resp.Text())
		if resp.SDKHTTPResponse != nil && outcome == "" {
			outcome = resp.SDKHTTPResponse.Headers.Get(HeaderCache)
		}
	}
	return b.String(), chunks, outcome, nil
}
