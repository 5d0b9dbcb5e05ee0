package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// streamChat sends a stream request and returns the assembled content, the
// response headers and the stream's error (nil when it ended with [DONE]).
func streamChat(t *testing.T, e *env, question string, headers ...string) (string, http.Header, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.front.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":`+quote(question)+`}]}`))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", resp.Header, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	asm := newAssembler(true)
	rd := newSSEReader(resp.Body)
	for {
		ev, _, err := rd.next()
		if errors.Is(err, io.EOF) {
			return asm.text(), resp.Header, errors.New("stream ended without [DONE]")
		}
		if err != nil {
			return asm.text(), resp.Header, err
		}
		if ev.Event == "error" || strings.HasPrefix(string(ev.Data), `{"error"`) {
			return asm.text(), resp.Header, fmt.Errorf("error event: %s", ev.Data)
		}
		if ev.Done() {
			return asm.text(), resp.Header, nil
		}
		if err := asm.add(ev.Data); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStreamMissThenHits(t *testing.T) {
	e := newEnv(t, envOptions{})
	got, h, err := streamChat(t, e, "Tell me about tides")
	if err != nil {
		t.Fatal(err)
	}
	if want := "answer to: Tell me about tides"; got != want {
		t.Errorf("streamed %q, want %q", got, want)
	}
	if got, want := h.Get(HeaderCache), OutcomeMiss; got != want {
		t.Errorf("%s = %q, want %q", HeaderCache, got, want)
	}
	// The tee stored the assembled answer: a stream repeat is replayed...
	e.waitStreams()
	again, h2, err := streamChat(t, e, "Tell me about tides")
	if err != nil || h2.Get(HeaderCache) != OutcomeHitExact || again != got {
		t.Errorf("stream repeat: %s = %q, content %q, err %v; want hit-exact with %q", HeaderCache, h2.Get(HeaderCache), again, err, got)
	}
	// ...and a non-stream repeat gets the assembled JSON.
	r := e.post("/v1/chat/completions", chat("Tell me about tides"))
	if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
		t.Errorf("non-stream after stream miss: %s = %q, want %q", HeaderCache, got, want)
	}
	if c := r.content(t); c != got {
		t.Errorf("assembled content %q, want %q", c, got)
	}
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

func TestStreamFlushesAsItArrives(t *testing.T) {
	e := newEnv(t, envOptions{})
	release := make(chan struct{})
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"first "},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"second"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		return true
	}
	defer close(release)
	req, _ := http.NewRequest(http.MethodPost, e.front.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"slow"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(resp.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, "first ") {
			t.Errorf("first line %q, want the first chunk", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("first chunk not flushed while the upstream was still streaming")
	}
}

// twoTargets builds an env whose model routes to a primary that misbehaves
// and a fallback that answers normally.
func twoTargets(t *testing.T, primary http.HandlerFunc, resume bool) (*env, *fakeModel) {
	t.Helper()
	fallback := &fakeModel{}
	fb := httptestServer(t, fallback)
	pr := httptestServer(t, primary)
	e := newEnv(t, envOptions{
		caller: func(o *upstream.Options) {
			o.Upstreams = append(o.Upstreams,
				upstream.Upstream{Name: "primary", BaseURL: pr + "/v1", Timeout: 5 * time.Second},
				upstream.Upstream{Name: "fallback", BaseURL: fb + "/v1", Timeout: 5 * time.Second})
			o.Routes = []upstream.Route{{Name: "gpt-test", Targets: []upstream.Target{
				{Upstream: "primary", Model: "gpt-test", Priority: 0},
				{Upstream: "fallback", Model: "gpt-test", Priority: 1},
			}}}
		},
		proxy: func(o *Options) { o.Resume = resume; o.IdleTimeout = 300 * time.Millisecond },
	})
	return e, fallback
}

// cutAfter streams the role chunk and "The tide is " then misbehaves.
func cutAfter(how string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"p","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"The tide is "},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		switch how {
		case "cut":
			hj, ok := w.(http.Hijacker)
			if !ok {
				panic("no hijacker")
			}
			conn, _, _ := hj.Hijack()
			conn.Close()
		case "error-event":
			fmt.Fprint(w, "event: error\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n")
		case "stall":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
}

func TestStreamCutIsResumed(t *testing.T) {
	for _, how := range []string{"cut", "error-event", "stall"} {
		t.Run(how, func(t *testing.T) {
			e, fallback := twoTargets(t, cutAfter(how), true)
			fallback.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
				if s, _ := body["stream"].(bool); !s {
					return false
				}
				msgs := body["messages"].([]any)
				prefix := msgs[len(msgs)-2].(map[string]any)
				if prefix["role"] != "assistant" || prefix["content"] != "The tide is " {
					t.Errorf("resume request lacks the partial answer as an assistant prefix: %v", msgs)
				}
				streamAnswer(w, body, "high at noon.", 0)
				return true
			}
			got, _, err := streamChat(t, e, "When is the tide?")
			if err != nil {
				t.Fatalf("resumed stream: %v", err)
			}
			if want := "The tide is high at noon."; got != want {
				t.Errorf("resumed text %q, want %q (partial + continuation)", got, want)
			}
			// A cut stream is never cached, resumed or not.
			e.waitStreams()
			r := e.post("/v1/chat/completions", chat("When is the tide?"))
			if got := r.header.Get(HeaderCache); got == OutcomeHitExact {
				t.Errorf("a cut stream was cached: %s", r.body)
			}
		})
	}
}

func TestStreamCutWithoutResumeSendsErrorEvent(t *testing.T) {
	e, _ := twoTargets(t, cutAfter("cut"), false)
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = e.front.URL + "/v1"
	stream, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model: "gpt-test", Stream: true, Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "When is the tide?"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var text strings.Builder
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			t.Fatalf("the SDK saw a clean end of a cut stream (text %q)", text.String())
		}
		if err != nil {
			if !strings.Contains(err.Error(), "interrupted") {
				t.Errorf("SDK error %q does not say the stream was interrupted", err)
			}
			break
		}
		for _, c := range r.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if got, want := text.String(), "The tide is "; got != want {
		t.Errorf("partial text %q, want %q", got, want)
	}
	r := e.post("/v1/chat/completions", chat("When is the tide?"))
	if got := r.header.Get(HeaderCache); got == OutcomeHitExact {
		t.Error("the truncated stream was cached")
	}
}

func TestStreamFailureBeforeFirstByteFallsBack(t *testing.T) {
	var primaryCalls atomic.Int64
	e, fallback := twoTargets(t, func(w http.ResponseWriter, r *http.Request) {
		primaryCalls.Add(1)
		w.Header().Set("Retry-After", "0")
		writeJSON(w, 503, map[string]any{"error": map[string]any{"message": "model is at capacity"}})
	}, true)
	got, h, err := streamChat(t, e, "fall back please")
	if err != nil {
		t.Fatal(err)
	}
	if want := "answer to: fall back please"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	if primaryCalls.Load() == 0 || fallback.calls.Load() != 1 {
		t.Errorf("primary calls %d, fallback calls %d: want the primary tried, then one fallback call", primaryCalls.Load(), fallback.calls.Load())
	}
	if !strings.Contains(h.Get(HeaderUpstream), "fallback") {
		t.Errorf("%s = %q, want the fallback", HeaderUpstream, h.Get(HeaderUpstream))
	}
}

func TestStreamToolCallsPassAndAssemble(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if s, _ := body["stream"].(bool); !s {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := readFile("testdata/stream-toolcalls.sse")
		w.Write(b)
		return true
	}
	_, _, err := streamChat(t, e, "weather in Paris")
	if err != nil {
		t.Fatal(err)
	}
	e.waitStreams()
	r := e.post("/v1/chat/completions", chat("weather in Paris"))
	if got, want := r.header.Get(HeaderCache), OutcomeHitExact; got != want {
		t.Fatalf("%s = %q, want %q", HeaderCache, got, want)
	}
	var c openai.ChatCompletionResponse
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || len(c.Choices[0].Message.ToolCalls) != 1 || c.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("assembled tool call wrong: %s", r.body)
	}
}

func TestStreamCoalescedFollowersGetChunksLive(t *testing.T) {
	e := newEnv(t, envOptions{})
	release := make(chan struct{})
	var once sync.Once
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"part one, "},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"part two"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		return true
	}
	defer once.Do(func() { close(release) })
	const n = 4
	firsts := make(chan string, n)
	results := make(chan string, n)
	for range n {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, e.front.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"shared"}]}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results <- err.Error()
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			l, _ := br.ReadString('\n')
			firsts <- l
			rest, _ := io.ReadAll(br)
			results <- l + string(rest)
		}()
	}
	for i := range n {
		select {
		case l := <-firsts:
			if !strings.Contains(l, "part one") {
				t.Errorf("client %d first line %q", i, l)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d clients got the first chunk before the stream ended", i, n)
		}
	}
	once.Do(func() { close(release) })
	for range n {
		if r := <-results; !strings.Contains(r, "part two") || !strings.Contains(r, "[DONE]") {
			t.Errorf("client stream incomplete: %q", r)
		}
	}
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}

// A stream shared by coalesced clients is resumed with every listener's
// budget (MaxResumes each), one resume at a time: a run of cuts that would
// exhaust one client's resumes does not reach all of them at once. The
// budget stays bounded: a model that always cuts gets 1 + 2 × 2 calls for
// two clients, no more than their own streams could have made.
func TestStreamCoalescedResumesWithEveryListenersBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cuts     int64 // attempts cut before one answers
		wantText string
		wantErr  bool
	}{
		{"cut on the first try and two resumes", 3, "The tide is high at noon.", false},
		{"always cut", 100, "The tide is ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			var attempts atomic.Int64
			e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
				n := attempts.Add(1)
				if n > tc.cuts {
					streamAnswer(w, body, "high at noon.", 0)
					return true
				}
				w.Header().Set("Content-Type", "text/event-stream")
				if n == 1 {
					fmt.Fprint(w, `data: {"id":"p","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"The tide is "},"finish_reason":null}]}`+"\n\n")
					w.(http.Flusher).Flush()
					// Cut only once the second client follows this stream.
					deadline := time.Now().Add(10 * time.Second)
					for e.server.stats.coalesced.Load() < 1 && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
				fmt.Fprint(w, "event: error\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n")
				return true
			}
			type result struct {
				text string
				err  error
			}
			results := make(chan result, 2)
			for range 2 {
				go func() {
					text, _, err := streamChat(t, e, "When is the tide?")
					results <- result{text, err}
				}()
			}
			for range 2 {
				r := <-results
				if (r.err != nil) != tc.wantErr || r.text != tc.wantText {
					t.Errorf("client got %q, error %v; want %q, error %v", r.text, r.err, tc.wantText, tc.wantErr)
				}
			}
			e.waitStreams()
			// The follower is counted when its handler finishes, which may
			// come just after its client read the end of the stream.
			deadline := time.Now().Add(10 * time.Second)
			for e.server.stats.coalesced.Load() < 1 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := e.server.stats.coalesced.Load(); got != 1 {
				t.Errorf("coalesced = %d, want 1 (the two clients shared one stream)", got)
			}
			if got, want := attempts.Load(), min(tc.cuts+1, 1+2*2); got != want {
				t.Errorf("upstream attempts = %d, want %d", got, want)
			}
		})
	}
}
