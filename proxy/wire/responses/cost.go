package responses

import (
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// requestCost is what a Responses request costs an OpenAI token budget at
// admission: its text over wire.CharsPerToken (a previous_response_id's
// context is not in the body, and is corrected by the answer's usage),
// plus max_output_tokens when it sets it.
func requestCost(body []byte) upstream.Cost {
	return upstream.Cost{
		Input:  wire.TextTokens(body, "model", "previous_response_id", "user"),
		Output: wire.IntField(body, "max_output_tokens"),
	}
}
