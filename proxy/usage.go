package proxy

// Usage is the token counts of one answer as its provider reported them:
// Input is what the provider bills as prompt, Output as generation.
// Known is false when the answer carries no usage (a Chat stream without
// stream_options.include_usage, an error): nothing is counted then.
type Usage struct {
	Input, Output uint64
	Known         bool
}

// usageFields names where one API puts its usage: the top-level object
// (field) and the counters in it that add up to input and to output.
type usageFields struct {
	field         string
	input, output []string
}

// Each API's usage object, as its reference documents it.
var (
	// OpenAI Chat and legacy Completions: usage.prompt_tokens and
	// usage.completion_tokens (reasoning tokens are already inside
	// completion_tokens). Embeddings report prompt_tokens alone.
	chatUsage = usageFields{field: "usage", input: []string{"prompt_tokens"}, output: []string{"completion_tokens"}}
	// Anthropic Messages: "the total input tokens in a request is the
	// summation of input_tokens, cache_creation_input_tokens, and
	// cache_read_input_tokens" (Messages API reference, usage).
	messagesUsage = usageFields{field: "usage",
		input:  []string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"},
		output: []string{"output_tokens"}}
	// OpenAI Responses: usage.input_tokens (cached ones included, listed
	// again in input_tokens_details) and usage.output_tokens (reasoning
	// included).
	responsesUsage = usageFields{field: "usage", input: []string{"input_tokens"}, output: []string{"output_tokens"}}
	// Gemini: usageMetadata.promptTokenCount (+ toolUsePromptTokenCount) in,
	// candidatesTokenCount + thoughtsTokenCount out: thinking tokens are
	// billed as output and not counted in candidatesTokenCount.
	geminiUsage = usageFields{field: "usageMetadata",
		input:  []string{"promptTokenCount", "toolUsePromptTokenCount"},
		output: []string{"candidatesTokenCount", "thoughtsTokenCount"}}
)

// read finds the usage of a JSON answer body without decoding it: a scan
// of the top-level fields and of the usage object's, no allocation, so the
// miss path pays a pass over bytes it already holds. A body it cannot scan,
// or one without the usage object, gives a zero, unknown Usage.
func (uf *usageFields) read(body []byte) Usage {
	var u Usage
	var obj []byte
	whole := topFields(body, func(key []byte, vStart, vEnd int) bool {
		if string(key) == uf.field {
			obj = body[vStart:vEnd]
		}
		return true
	})
	if !whole || len(obj) == 0 || obj[0] != '{' {
		return u
	}
	ok := topFields(obj, func(key []byte, vStart, vEnd int) bool {
		n, isNum := parseCount(obj[vStart:vEnd])
		if !isNum {
			return true
		}
		for _, f := range uf.input {
			if string(key) == f {
				u.Input += n
				u.Known = true
			}
		}
		for _, f := range uf.output {
			if string(key) == f {
				u.Output += n
				u.Known = true
			}
		}
		return true
	})
	if !ok {
		return Usage{}
	}
	return u
}

// parseCount reads a non-negative JSON integer.
func parseCount(v []byte) (uint64, bool) {
	if len(v) == 0 || len(v) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
