package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

const cachedChat = `{"id":"chatcmpl-orig","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Open Settings, then Reset\n\npassword."},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":9,"completion_tokens":6,"total_tokens":15}}`

func TestReplayGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := replay(&buf, nil, []byte(cachedChat), "chatcmpl-bwfixed", 1800000000, true); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/replay-golden.sse")
	if err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("replay transcript differs from testdata/replay-golden.sse\ngot:\n%s\nwant:\n%s", got, want)
	}
}

func TestReplayWithoutUsage(t *testing.T) {
	var buf bytes.Buffer
	if err := replay(&buf, nil, []byte(cachedChat), "x", 1, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `"usage"`) {
		t.Errorf("usage chunk sent although include_usage was not asked:\n%s", buf.String())
	}
	if !strings.HasSuffix(buf.String(), "data: [DONE]\n\n") {
		t.Errorf("replay does not end with [DONE]:\n%s", buf.String())
	}
}

// TestReplayParsedByGoOpenAI checks that an official SDK's stream reader
// assembles a replay into exactly the cached content.
func TestReplayParsedByGoOpenAI(t *testing.T) {
	for _, content := range []string{
		"Open Settings, then Reset\n\npassword.",
		"  leading spaces, ünïcödé and emoji 🚀 survive  ",
		"one",
	} {
		t.Run(content, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion", "model": "m",
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
				"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if err := replay(w, w.(http.Flusher).Flush, body, "chatcmpl-x", 1, true); err != nil {
					t.Error(err)
				}
			}))
			defer srv.Close()
			cfg := openai.DefaultConfig("k")
			cfg.BaseURL = srv.URL + "/v1"
			stream, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
				Model: "m", Stream: true, StreamOptions: &openai.StreamOptions{IncludeUsage: true},
				Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "q"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			var got strings.Builder
			var finish openai.FinishReason
			var usage *openai.Usage
			for {
				r, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if r.Usage != nil {
					usage = r.Usage
				}
				for _, c := range r.Choices {
					got.WriteString(c.Delta.Content)
					if c.FinishReason != "" {
						finish = c.FinishReason
					}
				}
			}
			if got.String() != content {
				t.Errorf("SDK assembled %q, want %q", got.String(), content)
			}
			if finish != openai.FinishReasonStop {
				t.Errorf("finish reason %q, want stop", finish)
			}
			if usage == nil || usage.TotalTokens != 3 {
				t.Errorf("usage %+v, want total_tokens 3", usage)
			}
		})
	}
}

func TestAssembleToolCalls(t *testing.T) {
	f, err := os.Open("testdata/stream-toolcalls.sse")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	asm := newAssembler(true)
	rd := newSSEReader(f)
	for {
		ev, _, err := rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Done() {
			asm.sawDone = true
			continue
		}
		if err := asm.add(ev.Data); err != nil {
			t.Fatal(err)
		}
	}
	if !asm.complete() {
		t.Fatal("tool-call stream with [DONE] and finish_reason not complete")
	}
	body, err := asm.completion()
	if err != nil {
		t.Fatal(err)
	}
	var got openai.ChatCompletionResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || len(got.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("assembled %s, want one choice with one tool call", body)
	}
	tc := got.Choices[0].Message.ToolCalls[0]
	if got, want := tc.Function.Name, "get_weather"; got != want {
		t.Errorf("tool name %q, want %q", got, want)
	}
	if got, want := tc.Function.Arguments, `{"city":"Paris"}`; got != want {
		t.Errorf("tool arguments %q, want %q", got, want)
	}
	if got, want := tc.ID, "call_abc"; got != want {
		t.Errorf("tool id %q, want %q", got, want)
	}
	if got, want := got.Choices[0].FinishReason, openai.FinishReasonToolCalls; got != want {
		t.Errorf("finish %q, want %q", got, want)
	}
	// The assembled body must itself replay into the same tool call.
	var buf bytes.Buffer
	if err := replay(&buf, nil, body, "id", 1, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `\"Paris\"`) || !strings.Contains(buf.String(), `"finish_reason":"tool_calls"`) {
		t.Errorf("replay of assembled tool call lost data:\n%s", buf.String())
	}
}

func TestSSEReaderCutMidEvent(t *testing.T) {
	rd := newSSEReader(strings.NewReader("data: {\"a\":1}\n\ndata: {\"b\""))
	if _, _, err := rd.next(); err != nil {
		t.Fatalf("first event: %v", err)
	}
	ev, _, err := rd.next()
	if err != nil {
		// A torn last line either errors or yields data that is not JSON.
		return
	}
	if json.Valid(ev.Data) {
		t.Errorf("torn event yielded valid JSON %q", ev.Data)
	}
}

func TestWordsRoundTrip(t *testing.T) {
	for _, s := range []string{"", "a", " a b  c ", "line\nbreak\ttab", "ünï 🚀 x"} {
		if got := strings.Join(words(s), ""); got != s {
			t.Errorf("words(%q) joined = %q", s, got)
		}
	}
	if got, want := len(words("one two three")), 3; got != want {
		t.Errorf("pieces = %d, want %d", got, want)
	}
}
