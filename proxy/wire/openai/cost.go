package openai

import (
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// requestCost is what a Chat Completions or Completions request costs an
// OpenAI token budget at admission: its text over wire.CharsPerToken, plus
// the output it reserves, max_completion_tokens or the older max_tokens,
// once per choice (n); OpenAI counts a request at the larger of its
// max_tokens and its estimated prompt
// (https://platform.openai.com/docs/guides/rate-limits). Embeddings
// reserve no output.
func (f openAIFormat) requestCost(body []byte) upstream.Cost {
	c := upstream.Cost{Input: wire.TextTokens(body, "model", "user")}
	if f.embeddings {
		c.Output = -1 // no output: nothing reserved, none learnt
		return c
	}
	if out := wire.IntField(body, "max_completion_tokens", "max_tokens"); out > 0 {
		c.Output = out * max(wire.IntField(body, "n"), 1)
	}
	return c
}
