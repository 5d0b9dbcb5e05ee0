package proxy

import "github.com/breakwater-dev/breakwater/proxy/wire"

// Usage is the token counts of one answer (wire.Usage).
type Usage = wire.Usage

// Each API's usage object, as its reference documents it.
var (
	// OpenAI Chat and legacy Completions: usage.prompt_tokens and
	// usage.completion_tokens (reasoning tokens are already inside
	// completion_tokens). Embeddings report prompt_tokens alone.
	chatUsage = wire.UsageFields{Field: "usage", Input: []string{"prompt_tokens"}, Output: []string{"completion_tokens"}}
	// Gemini: usageMetadata.promptTokenCount (+ toolUsePromptTokenCount) in,
	// candidatesTokenCount + thoughtsTokenCount out: thinking tokens are
	// billed as output and not counted in candidatesTokenCount.
	geminiUsage = wire.UsageFields{Field: "usageMetadata",
		Input:  []string{"promptTokenCount", "toolUsePromptTokenCount"},
		Output: []string{"candidatesTokenCount", "thoughtsTokenCount"}}
)
