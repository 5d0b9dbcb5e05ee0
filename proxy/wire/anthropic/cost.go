package anthropic

import (
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// requestCost is what a Messages request costs Anthropic's budgets at
// admission: its text (system, messages, tools) over wire.CharsPerToken
// against the input tokens per minute, and max_tokens (required by the
// API) against the output tokens per minute, which Anthropic estimates
// from max_tokens up front and corrects afterwards
// (https://docs.anthropic.com/en/api/rate-limits). Base64 images and
// documents (source.data) are left out.
func requestCost(body []byte) upstream.Cost {
	return upstream.Cost{
		Input:  wire.TextTokens(body, "model", "data", "media_type"),
		Output: wire.IntField(body, "max_tokens"),
	}
}
