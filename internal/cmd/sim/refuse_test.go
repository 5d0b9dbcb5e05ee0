package sim

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"
)

// refusal is what a test saw of one refused call.
type refusal struct {
	status     int
	kind       string // the API's error type or status
	retryAfter string // Retry-After header, or Gemini's RetryInfo retryDelay
}

// refuseThenAnswer asks question three times, then other once, through
// ask, at a sim that refuses each prompt's first two calls, and checks that
// the first two calls of question were refused with want, the third
// answered with the sim's answer, and other refused too (the count is per
// prompt).
func refuseThenAnswer(t *testing.T, ask func(url, q string) (string, *refusal)) {
	t.Helper()
	s := New(Options{RefuseFirst: 2, RetryAfter: time.Second})
	srv := httptest.NewServer(s)
	defer srv.Close()
	const question, other = "Why is the sea salty?", "Why is the sky blue?"
	var got []*refusal
	for range 2 {
		_, r := ask(srv.URL, question)
		if r == nil {
			t.Fatalf("call %d of %q answered, want it refused", len(got)+1, question)
		}
		got = append(got, r)
	}
	text, r := ask(srv.URL, question)
	if r != nil {
		t.Fatalf("third call of %q refused (%+v), want it answered", question, *r)
	}
	if want := Answer(question); text != want {
		t.Errorf("third call answered %q, want %q", text, want)
	}
	if _, r := ask(srv.URL, other); r == nil {
		t.Errorf("first call of %q answered, want it refused (refusals count per prompt)", other)
	}
	if n := s.Attempts(question); n != 3 {
		t.Errorf("Attempts(%q) = %d, want 3", question, n)
	}
	if st := s.Stats(); st.RateLimited != 3 || st.OK != 1 || st.Calls != 4 {
		t.Errorf("stats %+v, want 4 calls, 3 refused, 1 answered", st)
	}
	for i, r := range got {
		t.Logf("refusal %d: %+v", i+1, *r)
	}
	want := *got[0]
	if *got[1] != want {
		t.Errorf("refusals differ: %+v then %+v", want, *got[1])
	}
}

func TestRefuseFirstOpenAI(t *testing.T) {
	var last *refusal
	refuseThenAnswer(t, func(url, q string) (string, *refusal) {
		c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)},
		})
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			last = &refusal{status: apiErr.StatusCode, kind: apiErr.Code, retryAfter: apiErr.Response.Header.Get("Retry-After")}
			return "", last
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message.Content, nil
	})
	if want := (refusal{http.StatusTooManyRequests, "rate_limit_exceeded", "1"}); last == nil || *last != want {
		t.Errorf("refusal %+v, want %+v", last, want)
	}
}

func TestRefuseFirstAnthropic(t *testing.T) {
	var last *refusal
	refuseThenAnswer(t, func(url, q string) (string, *refusal) {
		c := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
		msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: "claude-test", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))},
		})
		var apiErr *anthropic.Error
		if errors.As(err, &apiErr) {
			last = &refusal{status: apiErr.StatusCode, kind: string(apiErr.Type()), retryAfter: apiErr.Response.Header.Get("retry-after")}
			return "", last
		}
		if err != nil {
			t.Fatal(err)
		}
		return msg.Content[0].Text, nil
	})
	if want := (refusal{529, "overloaded_error", "1"}); last == nil || *last != want {
		t.Errorf("refusal %+v, want %+v", last, want)
	}
}

func TestRefuseFirstGemini(t *testing.T) {
	var last *refusal
	refuseThenAnswer(t, func(url, q string) (string, *refusal) {
		c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
			APIKey: "gm-test", Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: url, RetryOptions: &genai.HTTPRetryOptions{Attempts: genai.Ptr[int32](1)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text(q), nil)
		var apiErr genai.APIError
		if errors.As(err, &apiErr) {
			last = &refusal{status: apiErr.Code, kind: apiErr.Status}
			for _, d := range apiErr.Details {
				if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo" {
					last.retryAfter, _ = d["retryDelay"].(string)
				}
			}
			return "", last
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.Text(), nil
	})
	if want := (refusal{http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "1s"}); last == nil || *last != want {
		t.Errorf("refusal %+v, want %+v", last, want)
	}
}

// The Gemini stream (streamGenerateContent?alt=sse) read by the SDK: the
// chunks join to the answer.
func TestGeminiStream(t *testing.T) {
	srv := httptest.NewServer(New(Options{PerToken: time.Microsecond}))
	defer srv.Close()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "gm-test", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	const q = "How do tides work?"
	text, chunks := "", 0
	for resp, err := range c.Models.GenerateContentStream(context.Background(), "gemini-2.5-flash", genai.Text(q), nil) {
		if err != nil {
			t.Fatal(err)
		}
		text += resp.Text()
		chunks++
	}
	if want := Answer(q); text != want || chunks < 2 {
		t.Errorf("stream: %d chunks joined to %q, want several joining to %q", chunks, text, want)
	}
}
