package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// geminiContent is one turn of a Gemini request: a role ("user" or
// "model") and its parts.
type geminiContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text string `json:"text"`
	} `json:"parts"`
}

// geminiRequest is the part of a generateContent request the sim reads.
type geminiRequest struct {
	Contents         []geminiContent `json:"contents"`
	GenerationConfig struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// isGemini reports whether path is a Gemini model call
// (/{version}/models/{model}:{method}); a POST on /v1/models/… can be
// nothing else, since OpenAI's models endpoint is GET only.
func isGemini(path string) bool {
	return strings.HasPrefix(path, "/v1beta/models/") || strings.HasPrefix(path, "/v1/models/")
}

// geminiPrompt counts the prompt tokens of contents and returns its last
// user text (a turn with no role is the user's).
func geminiPrompt(contents []geminiContent) (int, string) {
	prompt, question := 0, ""
	for _, c := range contents {
		parts := make([]string, 0, len(c.Parts))
		for _, p := range c.Parts {
			parts = append(parts, p.Text)
		}
		t := strings.Join(parts, " ")
		prompt += tokens(t)
		if c.Role == "" || c.Role == "user" {
			question = t
		}
	}
	return prompt, question
}

// gemini answers generateContent as the Gemini API does (a
// GenerateContentResponse), and streamGenerateContent as its ?alt=sse
// stream: one GenerateContentResponse per data event, a few words each, the
// last with finishReason and usageMetadata
// (https://ai.google.dev/api/generate-content).
func (s *Sim) gemini(w http.ResponseWriter, r *http.Request, release func()) {
	model, method, _ := strings.Cut(r.PathValue("target"), ":")
	if method != "generateContent" && method != "streamGenerateContent" {
		release()
		writeGeminiError(w, http.StatusNotFound, "NOT_FOUND", "sim: no method "+method+" on models/"+model)
		return
	}
	var req geminiRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil || len(req.Contents) == 0 {
		release()
		writeGeminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "sim: a JSON body with contents is required")
		return
	}
	prompt, question := geminiPrompt(req.Contents)
	ans := Answer(question)
	words := strings.Fields(ans)
	s.promptTokens.Add(int64(prompt))
	s.outputTokens.Add(int64(len(words)))
	response := func(text string, last bool) map[string]any {
		cand := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": fmt.Sprintf("sim-%d", s.calls.Load())}
		if last {
			cand["finishReason"] = "STOP"
			out["usageMetadata"] = map[string]any{"promptTokenCount": prompt, "candidatesTokenCount": len(words), "totalTokenCount": prompt + len(words)}
		}
		return out
	}
	if method == "generateContent" {
		if !sleep(r, time.Duration(len(words))*s.opts.PerToken) {
			return
		}
		s.ok.Add(1)
		release()
		writeJSON(w, http.StatusOK, response(ans, true))
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	const perEvent = 4 // words per event
	for i := 0; i < len(words); i += perEvent {
		end := min(i+perEvent, len(words))
		piece := strings.Join(words[i:end], " ")
		if end < len(words) {
			piece += " "
		}
		last := end == len(words)
		if last {
			s.ok.Add(1)
			release()
		}
		b, _ := json.Marshal(response(piece, last))
		if _, err := fmt.Fprintf(w, "data: %s\r\n\r\n", b); err != nil {
			return
		}
		if fl != nil && !last {
			fl.Flush()
		}
		if !last && !sleep(r, time.Duration(end-i)*s.opts.PerToken) {
			return
		}
	}
}

// writeGeminiError writes the Gemini API's error body (google.rpc.Status in
// JSON), with details if any.
func writeGeminiError(w http.ResponseWriter, code int, status, msg string, details ...any) {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	writeJSON(w, code, map[string]any{"error": e})
}
