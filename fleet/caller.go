package fleet

import (
	"context"
	"net/http"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// Caller is what the proxy calls upstream with (proxy.Caller);
// *upstream.Caller implements it.
type Caller interface {
	Do(ctx context.Context, req *upstream.Request) (*upstream.Response, error)
	Open(ctx context.Context, req *upstream.Request) (*upstream.StreamResponse, error)
	Snapshot() []upstream.ModelStats
}

// Wrap returns next with the budgets in front of it: a request draws on
// its budgets before the call, is refused at once (429) when one is
// spent, before it queues anywhere, and is reconciled with its answer's
// usage after. tenant names a request's tenant from its headers (the
// cache's partitioner). Without budgets, next itself.
func (f *Fleet) Wrap(next Caller, tenant func(http.Header) string) Caller {
	if len(f.budgets) == 0 {
		return next
	}
	return &budgetCaller{Caller: next, f: f, tenant: tenant}
}

type budgetCaller struct {
	Caller
	f      *Fleet
	tenant func(http.Header) string
}

func (c *budgetCaller) reserve(ctx context.Context, req *upstream.Request) (*Reservation, error) {
	if req.Short {
		// The cache's judge: part of answering from the cache, which uses
		// no budget.
		return nil, nil
	}
	t := ""
	if c.tenant != nil {
		t = c.tenant(req.Header)
	}
	return c.f.Reserve(ctx, t, req.Class, Estimate(req))
}

func (c *budgetCaller) Do(ctx context.Context, req *upstream.Request) (*upstream.Response, error) {
	r, err := c.reserve(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.Caller.Do(ctx, req)
	switch {
	case err != nil || resp.Status/100 != 2:
		r.Settle(ctx, 0, false, true)
	case resp.Rest == nil:
		u := usageOf(req, resp.Body)
		r.Settle(ctx, int64(u.Input+u.Output), u.Known, false)
	}
	return resp, err
}

// Open reserves like Do; a stream keeps its estimate (its usage arrives
// after the proxy has taken the body), and gives it back when no stream
// came.
func (c *budgetCaller) Open(ctx context.Context, req *upstream.Request) (*upstream.StreamResponse, error) {
	r, err := c.reserve(ctx, req)
	if err != nil {
		return nil, err
	}
	sr, err := c.Caller.Open(ctx, req)
	if err != nil || sr.Status/100 != 2 {
		r.Settle(ctx, 0, false, true)
	}
	return sr, err
}

// Estimate is a request's token cost before its answer: the cost its wire
// API estimated (upstream.Request.Cost, proxy/wire/*/cost.go) when it has
// one, else its body's bytes ÷ 4 (about four bytes a token in English text, the rule of thumb of
// OpenAI's tokenizer guide) plus the output it allows (max_tokens,
// max_completion_tokens, max_output_tokens, or Gemini's
// generationConfig.maxOutputTokens). Reconciled with the answer's usage.
func Estimate(req *upstream.Request) int64 {
	if c := req.Cost; c.Input+c.Output > 0 {
		return int64(c.Input + c.Output)
	}
	est := int64(len(req.Body)/4) + 1
	wire.TopFields(req.Body, func(key []byte, vStart, vEnd int) bool {
		switch string(key) {
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			est += count(req.Body[vStart:vEnd])
		case "generationConfig":
			wire.TopFields(req.Body[vStart:vEnd], func(k []byte, s, e int) bool {
				if string(k) == "maxOutputTokens" {
					est += count(req.Body[vStart+s : vStart+e])
				}
				return true
			})
		}
		return true
	})
	return est
}

func count(v []byte) int64 {
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' || n > 1<<40 {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// usageFields read any API's answer: Chat's and Responses' usage, Messages'
// (cache reads and writes are input, as the Messages API reference counts
// them) and Gemini's usageMetadata (thinking billed as output). Each API
// uses only its own names, so one scan over all of them reads each.
var usageFields = [...]wire.UsageFields{
	{Field: "usage",
		Input:  []string{"prompt_tokens", "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"},
		Output: []string{"completion_tokens", "output_tokens"}},
	{Field: "usageMetadata",
		Input:  []string{"promptTokenCount", "toolUsePromptTokenCount"},
		Output: []string{"candidatesTokenCount", "thoughtsTokenCount"}},
}

// usageOf reads an answer's usage with the request's own wire API's reader
// (upstream.Request.Usage) when it has one, else ReadUsage.
func usageOf(req *upstream.Request, body []byte) wire.Usage {
	if req.Usage != nil {
		in, out, ok := req.Usage(body)
		return wire.Usage{Input: uint64(max(in, 0)), Output: uint64(max(out, 0)), Known: ok}
	}
	return ReadUsage(body)
}

// ReadUsage reads a JSON answer's token usage, whichever API it speaks.
func ReadUsage(body []byte) wire.Usage {
	for i := range usageFields {
		if u := usageFields[i].Read(body); u.Known {
			return u
		}
	}
	return wire.Usage{}
}
