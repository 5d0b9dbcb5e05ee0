package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/sync/errgroup"
)

// LLMPrompt is the fixed system prompt of the LLM judge.
const LLMPrompt = `You decide whether two questions ask for the same thing, so that one answer serves both. ` +
	`Different numbers, names, places, dates, products or a negation make them different. ` +
	`Reply with JSON only, exactly {"same": true} or {"same": false}.`

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
	body, err := json.Marshal(chatRequest{
		Model: l.o.Model,
		Messages: []chatMessage{
			{Role: "system", Content: LLMPrompt},
			{Role: "user", Content: "Question A: " + query + "\nQuestion B: " + candidate},
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
// exactly a JSON object {"same": bool} (whitespace around it allowed): any
// other text, key or type is an error, never a guess.
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
	dec := json.NewDecoder(strings.NewReader(*c.Choices[0].Message.Content))
	dec.DisallowUnknownFields()
	var v struct {
		Same *bool `json:"same"`
	}
	if err := dec.Decode(&v); err != nil {
		return false, fmt.Errorf("parse judge verdict: %w", err)
	}
	if v.Same == nil {
		return false, fmt.Errorf("parse judge verdict: no \"same\" field")
	}
	content := *c.Choices[0].Message.Content
	if strings.TrimSpace(content[dec.InputOffset():]) != "" {
		return false, fmt.Errorf("parse judge verdict: text after the JSON object")
	}
	return *v.Same, nil
}
