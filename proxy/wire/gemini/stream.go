package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// geminiStream assembles a streamGenerateContent?alt=sse answer: each event
// is a whole GenerateContentResponse holding the next parts of each
// candidate; the last one of a candidate carries its finishReason, and the
// stream ends at EOF (there is no end marker). It also reads a non-stream
// body as a stream of one event (wire.Format.Finished).
type geminiStream struct {
	storeMaxTokens bool
	cands          map[int]*geminiCand
	top            map[string]json.RawMessage // usageMetadata, modelVersion, responseId, ...: last wins
	blocked        bool                       // promptFeedback.blockReason: the prompt was refused
	events         int
}

// geminiCand is one candidate being assembled.
type geminiCand struct {
	role      string
	parts     []*geminiPart
	fields    map[string]json.RawMessage // finishReason, safetyRatings, ...: last wins
	citations []json.RawMessage
	finish    string
}

// geminiPart is a merged text part (consecutive text deltas of one kind) or
// any other part kept whole (functionCall, inlineData, executableCode, ...).
type geminiPart struct {
	text    *strings.Builder
	thought bool
	sig     json.RawMessage // thoughtSignature, kept for the next turn
	raw     map[string]json.RawMessage
}

func newGeminiStream(storeMaxTokens bool) *geminiStream {
	return &geminiStream{storeMaxTokens: storeMaxTokens, cands: map[int]*geminiCand{}, top: map[string]json.RawMessage{}}
}

// Feed takes one upstream event. Events are relayed re-framed as
// "data: <json>\n\n": the upstream frames them with CRLF, and the Go SDK
// splits on the first "\n\n" in its buffer before it looks for "\r\n\r\n",
// so one error event of ours after CRLF events would merge with them.
func (g *geminiStream) Feed(ev wire.Event, _ []byte, _ bool) ([]byte, bool, error) {
	if ev.Event == "error" {
		return nil, false, wire.UpstreamErrorEvent(ev.Data)
	}
	if len(bytes.TrimSpace(ev.Data)) == 0 {
		return nil, false, nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, ev.Data); err != nil {
		return nil, false, fmt.Errorf("parse stream chunk: %w", err)
	}
	if err := g.add(compact.Bytes()); err != nil {
		return nil, false, err
	}
	return wire.EventBytes("", compact.Bytes()), false, nil
}

// add merges one GenerateContentResponse. Field names are matched exactly.
func (g *geminiStream) add(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return fmt.Errorf("parse stream chunk: %w", err)
	}
	if e, ok := top["error"]; ok && !isNull(e) {
		return wire.UpstreamErrorObject(e)
	}
	g.events++
	for k, v := range top {
		switch k {
		case "candidates":
		case "promptFeedback":
			g.top[k] = v
			var pf struct {
				BlockReason string `json:"blockReason"`
			}
			if json.Unmarshal(v, &pf) == nil && pf.BlockReason != "" {
				g.blocked = true
			}
		default:
			g.top[k] = v
		}
	}
	var cands []map[string]json.RawMessage
	if raw, ok := top["candidates"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &cands); err != nil {
			return fmt.Errorf("parse stream chunk candidates: %w", err)
		}
	}
	for _, c := range cands {
		idx := 0
		if raw, ok := c["index"]; ok {
			if err := json.Unmarshal(raw, &idx); err != nil {
				return fmt.Errorf("parse candidate index: %w", err)
			}
		}
		if idx < 0 || idx > 64 {
			return fmt.Errorf("parse stream chunk: candidate index %d out of range", idx)
		}
		acc := g.cands[idx]
		if acc == nil {
			acc = &geminiCand{fields: map[string]json.RawMessage{}}
			g.cands[idx] = acc
		}
		if err := acc.add(c); err != nil {
			return err
		}
	}
	return nil
}

func (c *geminiCand) add(cand map[string]json.RawMessage) error {
	for k, v := range cand {
		switch k {
		case "index":
		case "content":
			var content struct {
				Role  string                       `json:"role"`
				Parts []map[string]json.RawMessage `json:"parts"`
			}
			if err := json.Unmarshal(v, &content); err != nil {
				return fmt.Errorf("parse candidate content: %w", err)
			}
			if content.Role != "" {
				c.role = content.Role
			}
			for _, p := range content.Parts {
				if err := c.addPart(p); err != nil {
					return err
				}
			}
		case "citationMetadata":
			var cm struct {
				CitationSources []json.RawMessage `json:"citationSources"`
			}
			if json.Unmarshal(v, &cm) == nil {
				c.citations = append(c.citations, cm.CitationSources...)
			}
		case "finishReason":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("parse finishReason: %w", err)
			}
			c.finish = s
			c.fields[k] = v
		default:
			c.fields[k] = v
		}
	}
	return nil
}

// textPart reports whether p is a text part: "text" with at most "thought"
// and "thoughtSignature" beside it.
func textPart(p map[string]json.RawMessage) bool {
	if _, ok := p["text"]; !ok {
		return false
	}
	for k := range p {
		if k != "text" && k != "thought" && k != "thoughtSignature" {
			return false
		}
	}
	return true
}

func (c *geminiCand) addPart(p map[string]json.RawMessage) error {
	if !textPart(p) {
		c.parts = append(c.parts, &geminiPart{raw: p})
		return nil
	}
	var text string
	if err := json.Unmarshal(p["text"], &text); err != nil {
		return fmt.Errorf("parse text part: %w", err)
	}
	var thought bool
	if raw, ok := p["thought"]; ok {
		_ = json.Unmarshal(raw, &thought)
	}
	sig := p["thoughtSignature"]
	if n := len(c.parts); n > 0 {
		last := c.parts[n-1]
		// A delta continues the text before it unless it starts another
		// kind (thought or answer) or both carry a signature.
		if last.text != nil && last.thought == thought && (last.sig == nil || sig == nil) {
			last.text.WriteString(text)
			if sig != nil {
				last.sig = sig
			}
			return nil
		}
	}
	b := &strings.Builder{}
	b.WriteString(text)
	c.parts = append(c.parts, &geminiPart{text: b, thought: thought, sig: sig})
	return nil
}

func (p *geminiPart) render() map[string]any {
	if p.text == nil {
		out := make(map[string]any, len(p.raw))
		for k, v := range p.raw {
			out[k] = v
		}
		return out
	}
	out := map[string]any{"text": p.text.String()}
	if p.thought {
		out["thought"] = true
	}
	if p.sig != nil {
		out["thoughtSignature"] = p.sig
	}
	return out
}

func (g *geminiStream) FinishedAtEOF() bool {
	if g.blocked {
		return true
	}
	if len(g.cands) == 0 {
		return false
	}
	for _, c := range g.cands {
		if c.finish == "" {
			return false
		}
	}
	return true
}

// Partial is the answer text of the first candidate so far, thoughts
// excluded.
func (g *geminiStream) Partial() string {
	c := g.cands[0]
	if c == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range c.parts {
		if p.text != nil && !p.thought {
			b.WriteString(p.text.String())
		}
	}
	return b.String()
}

// Complete reports whether the answer may be stored: every candidate
// finished with STOP (or MAX_TOKENS when allowed) and has content. SAFETY,
// RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, MALFORMED_FUNCTION_CALL,
// OTHER and a blocked prompt never are.
func (g *geminiStream) Complete() bool {
	if g.events == 0 || g.blocked || len(g.cands) == 0 {
		return false
	}
	for _, c := range g.cands {
		switch {
		case len(c.parts) == 0:
			return false
		case c.finish == "STOP":
		case c.finish == "MAX_TOKENS" && g.storeMaxTokens:
		default:
			return false
		}
	}
	return true
}

// Body renders the assembled GenerateContentResponse.
func (g *geminiStream) Body() ([]byte, error) {
	out := make(map[string]any, len(g.top)+1)
	for k, v := range g.top {
		out[k] = v
	}
	idx := slices.Sorted(maps.Keys(g.cands))
	cands := make([]map[string]any, 0, len(idx))
	for _, i := range idx {
		c := g.cands[i]
		cm := make(map[string]any, len(c.fields)+3)
		for k, v := range c.fields {
			cm[k] = v
		}
		parts := make([]map[string]any, 0, len(c.parts))
		for _, p := range c.parts {
			parts = append(parts, p.render())
		}
		role := c.role
		if role == "" {
			role = "model"
		}
		cm["content"] = map[string]any{"parts": parts, "role": role}
		cm["index"] = i
		if len(c.citations) > 0 {
			cm["citationMetadata"] = map[string]any{"citationSources": c.citations}
		}
		cands = append(cands, cm)
	}
	if len(cands) > 0 {
		out["candidates"] = cands
	}
	return json.Marshal(out)
}

// geminiReplay writes a stored GenerateContentResponse as an alt=sse stream
// the genai SDKs read like the original: each candidate's text in word-sized
// chunks, other parts whole, the candidate's finishReason and ratings on its
// last chunk, usageMetadata on the stream's last chunk.
func geminiReplay(w io.Writer, flush func(), stored []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stored, &top); err != nil {
		return fmt.Errorf("replay cached answer: %w", err)
	}
	var cands []map[string]json.RawMessage
	if raw, ok := top["candidates"]; ok {
		if err := json.Unmarshal(raw, &cands); err != nil {
			return fmt.Errorf("replay cached answer: %w", err)
		}
	}
	if len(cands) == 0 {
		return errors.New("replay cached answer: no candidates")
	}
	// Every chunk carries the response's modelVersion and responseId, as the
	// API's own chunks do; the rest of the top level goes on the last one.
	common := map[string]any{}
	final := map[string]any{}
	for k, v := range top {
		switch k {
		case "candidates":
		case "modelVersion", "responseId", "createTime":
			common[k] = v
		default:
			final[k] = v
		}
	}
	send := func(cand map[string]any, last bool) error {
		ev := make(map[string]any, len(common)+len(final)+1)
		maps.Copy(ev, common)
		if last {
			maps.Copy(ev, final)
		}
		ev["candidates"] = []map[string]any{cand}
		return wire.WriteJSONEvent(w, flush, "", ev)
	}
	for ci, c := range cands {
		var content struct {
			Role  string                       `json:"role"`
			Parts []map[string]json.RawMessage `json:"parts"`
		}
		if raw, ok := c["content"]; ok {
			if err := json.Unmarshal(raw, &content); err != nil {
				return fmt.Errorf("replay cached answer: %w", err)
			}
		}
		if content.Role == "" {
			content.Role = "model"
		}
		var index any = ci
		if raw, ok := c["index"]; ok {
			index = raw
		}
		// Each chunk holds one part (or one piece of a text part).
		var pieces []replayPiece
		for _, p := range content.Parts {
			if !textPart(p) {
				pieces = append(pieces, replayPiece{whole: p})
				continue
			}
			var text string
			if err := json.Unmarshal(p["text"], &text); err != nil {
				return fmt.Errorf("replay cached answer: %w", err)
			}
			ws := wire.Words(text)
			if len(ws) == 0 {
				ws = []string{""}
			}
			for i, piece := range ws {
				rp := replayPiece{text: piece, thought: p["thought"]}
				if i == len(ws)-1 {
					// On the last piece, where the assembler (ours, the
					// SDKs') keeps it for the merged part.
					rp.sig = p["thoughtSignature"]
				}
				pieces = append(pieces, rp)
			}
		}
		if len(pieces) == 0 {
			pieces = []replayPiece{{empty: true}}
		}
		fast, err := newTextChunks(content.Role, index, common)
		if err != nil {
			return fmt.Errorf("replay cached answer: %w", err)
		}
		for pi, piece := range pieces {
			if pi < len(pieces)-1 && piece.plain() {
				if err := fast.write(w, flush, piece); err != nil {
					return err
				}
				continue
			}
			cand := map[string]any{"index": index}
			parts := []map[string]any{}
			if !piece.empty {
				parts = append(parts, piece.part())
			}
			cand["content"] = map[string]any{"parts": parts, "role": content.Role}
			lastOfCand := pi == len(pieces)-1
			if lastOfCand {
				for k, v := range c {
					if k != "content" && k != "index" {
						cand[k] = v
					}
				}
			}
			if err := send(cand, lastOfCand && ci == len(cands)-1); err != nil {
				return err
			}
		}
	}
	return nil
}

// textChunks writes the chunks of plain text pieces of one candidate
// (wire.Deltas), with the bytes json.Marshal gives the same chunk (keys
// sorted).
type textChunks struct{ wire.Deltas }

func newTextChunks(role string, index any, common map[string]any) (*textChunks, error) {
	rb, err := json.Marshal(role)
	if err != nil {
		return nil, err
	}
	ib, err := json.Marshal(index)
	if err != nil {
		return nil, err
	}
	tail := []byte("}")
	if len(common) > 0 {
		cb, err := json.Marshal(common)
		if err != nil {
			return nil, err
		}
		tail = append([]byte(","), cb[1:]...)
	}
	suffix := append([]byte(`}],"role":`), rb...)
	suffix = append(append(append(suffix, `},"index":`...), ib...), "}]"...)
	suffix = append(append(suffix, tail...), "\n\n"...)
	head := append(wire.AppendEventHead(make([]byte, 0, 56), ""), `{"candidates":[{"content":{"parts":[{"text":`...)
	return &textChunks{wire.Deltas{Head: head, Tail: suffix}}, nil
}

func (t *textChunks) write(w io.Writer, flush func(), piece replayPiece) error {
	if piece.thought != nil {
		return t.Write(w, flush, piece.text, []byte(`,"thought":`), piece.thought)
	}
	return t.Write(w, flush, piece.text)
}

// replayPiece is what one replayed chunk carries: a piece of a text part, a
// part sent whole, or nothing (a candidate without parts).
type replayPiece struct {
	text         string
	thought, sig json.RawMessage
	whole        map[string]json.RawMessage
	empty        bool
}

// plain reports whether the piece is text (maybe a thought) and nothing else.
func (p replayPiece) plain() bool { return p.whole == nil && p.sig == nil && !p.empty }

func (p replayPiece) part() map[string]any {
	if p.whole != nil {
		out := make(map[string]any, len(p.whole))
		for k, v := range p.whole {
			out[k] = v
		}
		return out
	}
	out := map[string]any{"text": p.text}
	if p.thought != nil {
		out["thought"] = p.thought
	}
	if p.sig != nil {
		out["thoughtSignature"] = p.sig
	}
	return out
}

// geminiResume asks the next target to continue a cut answer: the partial
// answer goes in as a model turn, followed by a user turn asking to continue.
// Only a single-candidate answer of text can be continued; with no text yet,
// the request is sent again as it was.
func geminiResume(body []byte, asm wire.StreamAssembler) ([]byte, error) {
	g, ok := asm.(*geminiStream)
	if !ok || len(g.cands) > 1 {
		return nil, wire.ErrNoResume
	}
	if c := g.cands[0]; c != nil {
		for _, p := range c.parts {
			if p.text == nil {
				return nil, wire.ErrNoResume // a function call or other part: not text to continue
			}
		}
	}
	partial := g.Partial()
	if partial == "" {
		return body, nil
	}
	return wire.ResumeBody(body, "contents", wire.ContinueTurns("model", partial, func(role, text string) any {
		return map[string]any{"role": role, "parts": []map[string]string{{"text": text}}}
	}))
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
