package gemini

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// The tests moved here from package proxy keep the names they had there.
type (
	sseEvent        = wire.Event
	StreamAssembler = wire.StreamAssembler
)

var words = wire.Words

const resumeInstruction = wire.ResumeInstruction

var errNoResume = wire.ErrNoResume

// geminiFlash, geminiAnswer and jsonEqual are the helpers of package proxy's
// tests that these tests use.
const geminiFlash = "gemini-2.5-flash"

func geminiAnswer(model, text, finish string) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"parts": []any{map[string]any{"text": text}}, "role": "model"},
			"finishReason": finish, "index": 0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 4, "candidatesTokenCount": 5, "totalTokenCount": 9},
		"modelVersion":  model,
		"responseId":    "resp-" + model,
	}
}

func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("not JSON: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}
