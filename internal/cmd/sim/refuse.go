package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// refuse answers a call the model will not take now, as the API at path
// refuses one, asking for Options.RetryAfter:
//   - Chat and the other OpenAI endpoints: 429 rate_limit_exceeded with
//     Retry-After (whole seconds, rounded up) and retry-after-ms, as OpenAI
//     sends them (https://platform.openai.com/docs/guides/error-codes);
//   - Anthropic Messages: 529 overloaded_error, with the same headers
//     (https://docs.anthropic.com/en/api/errors);
//   - Gemini: 429 RESOURCE_EXHAUSTED whose google.rpc.RetryInfo detail
//     carries the wait as retryDelay, and no Retry-After header, as the
//     Gemini API refuses (https://ai.google.dev/gemini-api/docs/rate-limits).
func (s *Sim) refuse(w http.ResponseWriter, path, why string) {
	ra := s.opts.RetryAfter
	if isGemini(path) {
		writeGeminiError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "sim: "+why+"; retry in "+ra.String(),
			map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": protoDuration(ra)})
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ra.Seconds()))))
	w.Header().Set("retry-after-ms", strconv.FormatInt(ra.Milliseconds(), 10))
	if path == "/v1/messages" {
		writeAnthropicError(w, 529, "overloaded_error", "Overloaded")
		return
	}
	writeError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded",
		fmt.Sprintf("%s; retry after %s", why, ra))
}

// protoDuration writes d as a google.protobuf.Duration in JSON: seconds with
// up to nine decimals and an "s".
func protoDuration(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// attempt counts a call of the prompt in body and returns its number (1 for
// the prompt's first call). Past maxRequestIDs prompts, a new prompt is not
// remembered and counts as past its refusals.
func (s *Sim) attempt(path string, body []byte) int {
	p := promptOf(path, body)
	s.idMu.Lock()
	defer s.idMu.Unlock()
	n, seen := s.prompts[p]
	if !seen && len(s.prompts) >= maxRequestIDs {
		return math.MaxInt
	}
	if s.prompts == nil {
		s.prompts = make(map[string]int)
	}
	s.prompts[p] = n + 1
	return n + 1
}

// Attempts is how many calls the model received for the prompt whose last
// user text is question (kept with Options.RefuseFirst above 0 or
// CountPrompts).
func (s *Sim) Attempts(question string) int {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	return s.prompts[question]
}

// promptOf is the last user text of a request body in any of the sim's
// APIs: Chat and Messages messages, Gemini contents, a completion's prompt.
// A body that does not decode is the prompt "".
func promptOf(path string, body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Contents []geminiContent `json:"contents"`
		Prompt   json.RawMessage `json:"prompt"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	if isGemini(path) {
		_, q := geminiPrompt(req.Contents)
		return q
	}
	q := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			q = text(m.Content)
		}
	}
	if q == "" && len(req.Prompt) > 0 {
		q = strings.Join(texts(req.Prompt), "\n")
	}
	return q
}
