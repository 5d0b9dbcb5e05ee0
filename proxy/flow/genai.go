package flow

import (
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// GenAIOf names an API's operation and provider as the GenAI conventions
// do (gen_ai.operation.name, gen_ai.provider.name): the provider is the
// one whose API the request speaks, which is what an OpenAI-compatible
// server behind the sidecar also answers.
func GenAIOf(f Format) (op, provider string) {
	if f.GenAIOperation != "" {
		return f.GenAIOperation, f.GenAIProvider
	}
	return "chat", ""
}

// genAIRequest is what the caller's attempt spans need of this request;
// zero with tracing off (no closures on the miss path then).
func (s *Flow) genAIRequest(f Format, stream bool) upstream.GenAI {
	if !s.opts.Tracing {
		return upstream.GenAI{}
	}
	op, provider := GenAIOf(f)
	g := upstream.GenAI{Operation: op, Provider: provider, Usage: func(body []byte) upstream.Tokens {
		u := f.Usage(body)
		return upstream.Tokens{Input: u.Input, Output: u.Output, Model: responseModel(body), Known: u.Known}
	}}
	if stream {
		g.Stream = &upstream.Tokens{}
	}
	return g
}

// responseModel is the model an answer says produced it: "model" in
// OpenAI's and Anthropic's answers, "modelVersion" in Gemini's.
func responseModel(body []byte) string {
	var model string
	wire.TopFields(body, func(key []byte, vStart, vEnd int) bool {
		switch string(key) {
		case "model", "modelVersion":
			v := body[vStart:vEnd]
			if len(v) >= 2 && v[0] == '"' {
				model = string(v[1 : len(v)-1])
			}
		}
		return true
	})
	return model
}
