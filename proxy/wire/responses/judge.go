package responses

import (
	"encoding/json"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// responsesJudge is a Responses judge request
// (https://platform.openai.com/docs/api-reference/responses/create).
type responsesJudge struct {
	Model        string   `json:"model"`
	Instructions string   `json:"instructions"`
	Input        string   `json:"input"`
	Temperature  *float64 `json:"temperature,omitempty"`
	// MaxOutputTokens: the API's minimum is 16 (a lower value is answered
	// 400), which holds a verdict; reasoning tokens count against it.
	MaxOutputTokens int `json:"max_output_tokens"`
	// Store false: the verdict is no state to keep at the provider.
	Store     bool `json:"store"`
	Reasoning *struct {
		Effort string `json:"effort"`
	} `json:"reasoning,omitempty"`
}

// judge is the Responses judge: judgeRequest, with the API's credential
// header besides Authorization (Azure's Api-Key), and the organization and
// project a key is billed to
// (https://platform.openai.com/docs/api-reference/authentication).
var judge = &wire.Judge{Request: judgeRequest, Headers: []string{"Api-Key", "OpenAI-Organization", "OpenAI-Project"}}

// judgeRequest: instructions and one input text, a
// reply of a few tokens, not stored, at the lowest reasoning.effort the
// model takes (wire.OpenAIReasoning; temperature only for models without
// reasoning, which the others refuse).
func judgeRequest(model, system, user string) (string, []byte) {
	r := responsesJudge{Model: model, Instructions: system, Input: user}
	effort, maxTokens := wire.OpenAIReasoning(model)
	r.MaxOutputTokens = max(maxTokens, 16)
	if effort == "" {
		zero := 0.0
		r.Temperature = &zero
	} else {
		r.Reasoning = &struct {
			Effort string `json:"effort"`
		}{effort}
	}
	body, _ := json.Marshal(r) // strings and numbers only: never fails
	return ResponsesEndpoint, body
}
