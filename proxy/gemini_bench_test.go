package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// BenchmarkGeminiReplay1000Tokens: replaying a cached 1,000-token Gemini
// answer as alt=sse chunks, next to the Chat Completions replay of the same
// text in the same run (compare the two as a ratio).
func BenchmarkGeminiReplay1000Tokens(b *testing.B) {
	answer, chat := thousandTokens()
	gemini, _ := json.Marshal(geminiAnswer(geminiFlash, answer, "STOP"))
	b.Run("gemini", func(b *testing.B) {
		var out bytes.Buffer
		if err := geminiReplay(&out, func() {}, gemini); err != nil {
			b.Fatal(err)
		}
		if got := bytes.Count(out.Bytes(), []byte("data: ")); got != 1000 {
			b.Fatalf("replay sent %d events, want 1000", got)
		}
		b.SetBytes(int64(out.Len()))
		b.ReportAllocs()
		for b.Loop() {
			if err := geminiReplay(io.Discard, func() {}, gemini); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := replay(io.Discard, func() {}, chat, "chatcmpl-bwbench", 1700000000, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGeminiAssemble1000Tokens: a streamed 1,000-token Gemini answer
// fed through the assembler (as relayed) and rendered as the stored body.
func BenchmarkGeminiAssemble1000Tokens(b *testing.B) {
	answer, _ := thousandTokens()
	var events [][]byte
	for _, piece := range words(answer) {
		ev, _ := json.Marshal(map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": piece}}, "role": "model"}, "index": 0}}, "modelVersion": geminiFlash})
		events = append(events, ev)
	}
	last, _ := json.Marshal(geminiAnswer(geminiFlash, "", "STOP"))
	events = append(events, last)
	b.ReportAllocs()
	for b.Loop() {
		a := newGeminiStream(false)
		for _, ev := range events {
			if _, _, err := a.Feed(sseEvent{Data: ev}, nil, false); err != nil {
				b.Fatal(err)
			}
		}
		if !a.Complete() {
			b.Fatal("not complete")
		}
		if _, err := a.Body(); err != nil {
			b.Fatal(err)
		}
	}
}
