package gemini

import (
	"encoding/json"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// requestCost is what a generateContent request costs a Gemini quota at
// admission: its text (contents, systemInstruction, tools) over
// wire.CharsPerToken against the input tokens per minute
// (GenerateContent…InputTokensPerModelPerMinute), plus
// generationConfig.maxOutputTokens once per candidate when it sets it.
// Inline data (base64) is left out.
func requestCost(body []byte) upstream.Cost {
	c := upstream.Cost{Input: wire.TextTokens(body, "model", "data", "mimeType", "mime_type")}
	var req struct {
		GenerationConfig *struct {
			MaxOutputTokens int `json:"maxOutputTokens"`
			CandidateCount  int `json:"candidateCount"`
		} `json:"generationConfig"`
	}
	if json.Unmarshal(body, &req) == nil && req.GenerationConfig != nil && req.GenerationConfig.MaxOutputTokens > 0 {
		c.Output = req.GenerationConfig.MaxOutputTokens * max(req.GenerationConfig.CandidateCount, 1)
	}
	return c
}
