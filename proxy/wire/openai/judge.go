package openai

import (
	"encoding/json"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// chatJudge is a Chat Completions judge request
// (https://platform.openai.com/docs/api-reference/chat/create).
type chatJudge struct {
	Model       string         `json:"model"`
	Messages    []judgeMessage `json:"messages"`
	Temperature *float64       `json:"temperature,omitempty"`
	// MaxTokens for a model without reasoning: the field every
	// OpenAI-compatible server (vLLM, llama.cpp, Ollama) reads.
	MaxTokens int `json:"max_tokens,omitempty"`
	// MaxCompletionTokens for a reasoning model, which answers 400 to
	// max_tokens; reasoning tokens count against it.
	MaxCompletionTokens int    `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string `json:"reasoning_effort,omitempty"`
}

type judgeMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatJudgeOf is the Chat endpoints' judge: a Chat Completions request on
// the model (judgeRequest), with the API's credential header besides
// Authorization (Azure's Api-Key), and the organization and project a key
// is billed to (https://platform.openai.com/docs/api-reference/authentication).
var chatJudgeOf = &wire.Judge{Request: judgeRequest, Headers: []string{"Api-Key", "OpenAI-Organization", "OpenAI-Project"}}

// judgeRequest: a system and a user message, a reply
// of a few tokens at temperature 0, and the lowest reasoning_effort the
// model takes (wire.OpenAIReasoning; reasoning models accept no
// temperature but the default, so it is left out for them).
func judgeRequest(model, system, user string) (string, []byte) {
	r := chatJudge{Model: model, Messages: []judgeMessage{{"system", system}, {"user", user}}}
	effort, maxTokens := wire.OpenAIReasoning(model)
	if effort == "" {
		zero := 0.0
		r.Temperature, r.MaxTokens = &zero, maxTokens
	} else {
		r.ReasoningEffort, r.MaxCompletionTokens = effort, maxTokens
	}
	body, _ := json.Marshal(r) // strings and numbers only: never fails
	return ChatEndpoint, body
}
