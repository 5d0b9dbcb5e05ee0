package gemini

import (
	"encoding/json"
	"strings"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// geminiJudge is a generateContent judge request
// (https://ai.google.dev/api/generate-content).
type geminiJudge struct {
	SystemInstruction geminiContent   `json:"systemInstruction"`
	Contents          []geminiContent `json:"contents"`
	GenerationConfig  struct {
		Temperature     float64         `json:"temperature"`
		MaxOutputTokens int             `json:"maxOutputTokens"`
		ThinkingConfig  *thinkingConfig `json:"thinkingConfig,omitempty"`
	} `json:"generationConfig"`
}

type thinkingConfig struct {
	ThinkingBudget *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel  string `json:"thinkingLevel,omitempty"`
}

type geminiContent struct {
	Role  string `json:"role,omitempty"`
	Parts []struct {
		Text string `json:"text"`
	} `json:"parts"`
}

func textContent(role, text string) geminiContent {
	c := geminiContent{Role: role}
	c.Parts = append(c.Parts, struct {
		Text string `json:"text"`
	}{text})
	return c
}

// judgeRequest: a non-streaming generateContent on
// model's path (the version the client called), the system instruction, one
// user turn, a reply of a few tokens at temperature 0, and thinking as low
// as the model allows (https://ai.google.dev/gemini-api/docs/thinking):
//   - Gemini 2.5 Flash and Flash-Lite: thinkingBudget 0 turns it off;
//   - Gemini 2.5 Pro cannot turn it off: 128 is its lowest budget, and
//     thinking tokens count against maxOutputTokens;
//   - Gemini 3 takes thinkingLevel, "low" its lowest on Pro;
//   - earlier models do not think and get no thinkingConfig.
func (f *geminiFormat) judgeRequest(model, system, user string) (string, []byte) {
	r := geminiJudge{SystemInstruction: textContent("", system), Contents: []geminiContent{textContent("user", user)}}
	r.GenerationConfig.MaxOutputTokens = wire.JudgeMaxTokens
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "gemini-3"):
		r.GenerationConfig.ThinkingConfig = &thinkingConfig{ThinkingLevel: "low"}
		r.GenerationConfig.MaxOutputTokens = 1024
	case strings.Contains(m, "2.5-pro"):
		budget := 128
		r.GenerationConfig.ThinkingConfig = &thinkingConfig{ThinkingBudget: &budget}
		r.GenerationConfig.MaxOutputTokens = budget + 64
	case strings.Contains(m, "2.5"):
		budget := 0
		r.GenerationConfig.ThinkingConfig = &thinkingConfig{ThinkingBudget: &budget}
	}
	body, _ := json.Marshal(r) // strings and numbers only: never fails
	// Not streamed, and without the client's query (its alt=sse asks for
	// events).
	judge := *f
	judge.stream, judge.model, judge.query = false, model, nil
	return judge.upstreamPath(model), body
}

// judgeHeaders are the client headers the judge keeps: the API's credential
// header besides Authorization, and the project a request is billed to.
var judgeHeaders = []string{"X-Goog-Api-Key", "X-Goog-User-Project"}
