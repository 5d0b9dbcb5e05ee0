package sim

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// maxBody bounds a request body; the sim is a test tool, not a gateway.
const maxBody = 4 << 20

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Prompt json.RawMessage `json:"prompt"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"`
	// MaxTokens and MaxCompletionTokens bound the answer; the token budget
	// reserves them (tokens.go).
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

func decode(w http.ResponseWriter, r *http.Request) (*chatRequest, bool) {
	var req chatRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "sim: decode request body: "+err.Error())
		return nil, false
	}
	return &req, true
}

// text returns the text of a message content: a string, or the text parts
// of an array of parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				if b.Len() > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// texts returns a prompt or input field as a list of strings.
func texts(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	return nil
}

func (s *Sim) chat(w http.ResponseWriter, r *http.Request, release func()) {
	req, ok := decode(w, r)
	if !ok {
		release()
		return
	}
	if len(req.Messages) == 0 {
		release()
		writeError(w, http.StatusBadRequest, "invalid_request_error", "missing_messages", "sim: messages must not be empty")
		return
	}
	question, system, prompt := "", "", 0
	for _, m := range req.Messages {
		t := text(m.Content)
		prompt += tokens(t)
		switch m.Role {
		case "user":
			question = t
		case "system", "developer":
			system = t
		}
	}
	ans, ok := s.judge(system, question)
	if !ok {
		ans = Answer(question)
	}
	s.answer(w, r, release, req, "chat.completion", ans, prompt)
}

func (s *Sim) completion(w http.ResponseWriter, r *http.Request, release func()) {
	req, ok := decode(w, r)
	if !ok {
		release()
		return
	}
	p := strings.Join(texts(req.Prompt), "\n")
	s.answer(w, r, release, req, "text_completion", Answer(p), tokens(p))
}

func (s *Sim) answer(w http.ResponseWriter, r *http.Request, release func(), req *chatRequest, object, ans string, prompt int) {
	words := strings.Fields(ans)
	model := req.Model
	if model == "" {
		model = s.opts.Models[0]
	}
	id := fmt.Sprintf("chatcmpl-sim-%d", s.calls.Load())
	created := time.Now().Unix()
	s.promptTokens.Add(int64(prompt))
	s.outputTokens.Add(int64(len(words)))
	usage := map[string]int{"prompt_tokens": prompt, "completion_tokens": len(words), "total_tokens": prompt + len(words)}
	if req.Stream {
		s.stream(w, r, release, object, id, model, created, words, usage)
		return
	}
	if !sleep(r, time.Duration(len(words))*s.opts.PerToken) {
		return
	}
	choice := map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil}
	if object == "text_completion" {
		choice["text"] = ans
	} else {
		choice["message"] = map[string]any{"role": "assistant", "content": ans}
	}
	s.ok.Add(1)
	release()
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "object": object, "created": created, "model": model,
		"choices": []any{choice}, "usage": usage,
	})
}

// stream sends one chunk per word, PerToken apart, then a final chunk with
// finish_reason and usage, then [DONE]. The last writes are left to net/http
// to flush after the handler returns, so the slot is free before the client
// sees the end of the stream.
func (s *Sim) stream(w http.ResponseWriter, r *http.Request, release func(), object, id, model string, created int64, words []string, usage map[string]int) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	chunkObject := "chat.completion.chunk"
	if object == "text_completion" {
		chunkObject = object
	}
	send := func(choice map[string]any, extra map[string]any) error {
		m := map[string]any{"id": id, "object": chunkObject, "created": created, "model": model, "choices": []any{choice}}
		for k, v := range extra {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		_, err := fmt.Fprintf(w, "data: %s\n\n", b)
		return err
	}
	delta := func(d map[string]any) map[string]any {
		if object == "text_completion" {
			return map[string]any{"index": 0, "text": d["content"], "finish_reason": nil}
		}
		return map[string]any{"index": 0, "delta": d, "finish_reason": nil}
	}
	if object != "text_completion" {
		if send(delta(map[string]any{"role": "assistant", "content": ""}), nil) != nil {
			return
		}
	}
	for i, word := range words {
		if i > 0 {
			word = " " + word
		}
		if send(delta(map[string]any{"content": word}), nil) != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		if !sleep(r, s.opts.PerToken) {
			return
		}
	}
	last := delta(map[string]any{})
	last["finish_reason"] = "stop"
	s.ok.Add(1)
	release()
	send(last, map[string]any{"usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (s *Sim) embeddings(w http.ResponseWriter, r *http.Request, release func()) {
	req, ok := decode(w, r)
	if !ok {
		release()
		return
	}
	in := texts(req.Input)
	if len(in) == 0 {
		release()
		writeError(w, http.StatusBadRequest, "invalid_request_error", "missing_input", "sim: input must be a string or a list of strings")
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]item, len(in))
	prompt := 0
	for i, t := range in {
		data[i] = item{Object: "embedding", Index: i, Embedding: Vector(t, s.opts.Dimension)}
		prompt += tokens(t)
	}
	model := req.Model
	if model == "" {
		model = "sim-embedding"
	}
	s.promptTokens.Add(int64(prompt))
	s.ok.Add(1)
	release()
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": model,
		"usage": map[string]int{"prompt_tokens": prompt, "total_tokens": prompt},
	})
}

// Vector is the simulated embedding of text: a unit vector of length dim
// drawn from a generator seeded by a hash of the text, so equal texts get
// equal vectors and different texts nearly orthogonal ones.
func Vector(text string, dim int) []float32 {
	h := fnv.New128a()
	h.Write([]byte(text))
	sum := h.Sum(nil)
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:])))
	v := make([]float32, dim)
	var norm float64
	for i := range v {
		x := rng.NormFloat64()
		v[i] = float32(x)
		norm += x * x
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}
