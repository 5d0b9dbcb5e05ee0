package anthropic

import (
	"encoding/json"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// messagesJudge is a Messages judge request
// (https://docs.anthropic.com/en/api/messages). It has no "thinking"
// field: extended thinking is off unless a request enables it
// (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking).
type messagesJudge struct {
	Model       string         `json:"model"`
	System      string         `json:"system"`
	Messages    []judgeMessage `json:"messages"`
	MaxTokens   int            `json:"max_tokens"`
	Temperature float64        `json:"temperature"`
}

type judgeMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// judge is the Messages judge: judgeRequest, with the API's credential
// header besides Authorization, the API version the API requires on every
// request, and the client's beta features
// (https://docs.anthropic.com/en/api/versioning).
var judge = &wire.Judge{Request: judgeRequest, Headers: []string{"X-Api-Key", "Anthropic-Version", "Anthropic-Beta"}}

// judgeRequest: the system prompt, one user turn, a
// reply of at most wire.JudgeMaxTokens at temperature 0, no thinking. The
// request keeps the client's anthropic-version and anthropic-beta headers.
func judgeRequest(model, system, user string) (string, []byte) {
	body, _ := json.Marshal(messagesJudge{
		Model: model, System: system, Messages: []judgeMessage{{"user", user}}, MaxTokens: wire.JudgeMaxTokens,
	}) // strings and numbers only: never fails
	return MessagesEndpoint, body
}
