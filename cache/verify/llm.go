package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"golang.org/x/sync/errgroup"

	"github.com/breakwater-dev/breakwater/lib/judgeprompt"
)

// Completer sends one Chat Completions request body for model and returns
// the answer's status and body. internal/app implements it over the upstream
// caller (routing, retries and breakers of the configured upstreams); class
// is the caller's concurrency pool, "" the default one.
type Completer interface {
	Complete(ctx context.Context, model, class string, body []byte) (status int, answer []byte, err error)
}

// LLMOptions configure an LLM judge.
type LLMOptions struct {
	// Caller sends the judge's requests (routing, retries and breakers of
	// the configured upstreams). Required.
	Caller Completer
	// Model is the chat model asked. Required.
	Model string
	// Class is the caller's concurrency pool for judge calls; "" is the
	// default pool.
	Class string
}

// LLM is a judge that asks a small chat model, one call per candidate, and
// parses its verdict strictly.
type LLM struct {
	o LLMOptions
}

// NewLLM returns an LLM judge.
func NewLLM(o LLMOptions) (*LLM, error) {
	if o.Caller == nil || o.Model == "" {
		return nil, fmt.Errorf("new llm judge: a caller and a model are required")
	}
	return &LLM{o: o}, nil
}

// Name implements Judge.
func (l *LLM) Name() string { return JudgeLLM }

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature float64       `json:"temperature"`
	MaxTokens   int           `json:"max_tokens"`
}

// Judge implements Judge: the candidates are asked concurrently (a lookup
// puts at most a few), and any failed or unparsable verdict fails them all.
func (l *LLM) Judge(ctx context.Context, query string, candidates []string) ([]bool, error) {
	out := make([]bool, len(candidates))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range candidates {
		g.Go(func() error {
			ok, err := l.one(gctx, query, c)
			out[i] = ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func (l *LLM) one(ctx context.Context, query, candidate string) (bool, error) {
	sys, user := judgeprompt.Build(judgeprompt.NewNonce(), query, candidate)
	body, err := json.Marshal(chatRequest{
		Model: l.o.Model,
		Messages: []chatMessage{
			{Role: "system", Content: sys},
			{Role: "user", Content: user},
		},
		MaxTokens: 16,
	})
	if err != nil {
		return false, fmt.Errorf("encode judge request: %w", err)
	}
	status, answer, err := l.o.Caller.Complete(ctx, l.o.Model, l.o.Class, body)
	if err != nil {
		return false, fmt.Errorf("call llm judge: %w", err)
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("call llm judge: status %d", status)
	}
	return ParseVerdict(answer)
}

// ParseVerdict reads a chat completion whose first choice's content must be
// exactly a JSON object {"same": bool} (judgeprompt.ParseVerdict).
func ParseVerdict(completion []byte) (bool, error) {
	var c struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(completion, &c); err != nil {
		return false, fmt.Errorf("decode judge completion: %w", err)
	}
	if len(c.Choices) == 0 || c.Choices[0].Message.Content == nil {
		return false, fmt.Errorf("decode judge completion: no content")
	}
	return judgeprompt.ParseVerdict(*c.Choices[0].Message.Content)
}
