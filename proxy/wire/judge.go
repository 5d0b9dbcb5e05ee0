package wire

import "strings"

// JudgeMaxTokens caps a judge reply without reasoning: {"same": false} is
// six to eight tokens in the providers' tokenizers.
const JudgeMaxTokens = 16

// OpenAIReasoning is the reasoning_effort (Chat Completions) or
// reasoning.effort (Responses) a judge request sends to an OpenAI model,
// and the output cap that leaves room for what reasoning remains; "" for a
// model that takes no reasoning setting (a non-reasoning model answers 400
// "Unsupported parameter" to one). What each family accepts
// (https://platform.openai.com/docs/guides/reasoning):
//   - gpt-5, gpt-5-mini, gpt-5-nano: "minimal" is the lowest;
//   - gpt-5.1 and later: "none" turns reasoning off;
//   - o1, o3, o4-mini: "low" is the lowest, and reasoning tokens count
//     against max_completion_tokens / max_output_tokens, so the cap is wide.
func OpenAIReasoning(model string) (effort string, maxTokens int) {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // a gateway's "openai/gpt-5"
	}
	switch {
	case strings.HasPrefix(m, "gpt-5."):
		return "none", JudgeMaxTokens
	case strings.HasPrefix(m, "gpt-5"):
		return "minimal", 128
	case len(m) > 1 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9':
		return "low", 1024
	}
	return "", JudgeMaxTokens
}
