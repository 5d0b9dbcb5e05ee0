package responses

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// These tests moved here from package proxy with the Responses API.
type sseEvent = wire.Event

// A response larger than the assembler's bound is relayed, not stored.
func TestResponsesStreamBounded(t *testing.T) {
	big := strings.Repeat("x", maxResponseBytes)
	data, _ := json.Marshal(map[string]any{"type": "response.completed", "sequence_number": 0,
		"response": map[string]any{"id": "resp_1", "object": "response", "status": "completed", "output": []any{big}}})
	asm := newResponsesStream()
	out, end, err := asm.Feed(sseEvent{Event: "response.completed", Data: data}, data, false)
	if err != nil || !end || len(out) != len(data) {
		t.Fatalf("feed: end %v err %v relayed %d", end, err, len(out))
	}
	if asm.Complete() {
		t.Error("an answer beyond maxResponseBytes is storable")
	}
}

func TestResponsesStateful(t *testing.T) {
	cases := map[string]string{
		`{"model":"m","input":"hi","background":true}`:          "background",
		`{"model":"m","input":"hi","background":false}`:         "",
		`{"model":"m","input":"hi","Background":true}`:          "",
		`{"model":"m","input":"hi","conversation":"conv_1"}`:    "conversation",
		`{"model":"m","input":"hi","conversation":{"id":"c"}}`:  "conversation",
		`{"model":"m","input":"hi","conversation":null}`:        "",
		`{"prompt":{"id":"pmpt_1"},"input":"hi"}`:               "prompt without model",
		`{"model":"m","prompt":{"id":"pmpt_1"},"input":"hi"}`:   "",
		`{"model":"m","input":"hi","previous_response_id":"r"}`: "",
		`[1,2]`: "",
		`{`:     "",
	}
	for body, want := range cases {
		if got := responsesStateful([]byte(body)); got != want {
			t.Errorf("responsesStateful(%s) = %q, want %q", body, got, want)
		}
	}
}

// The delta fast path writes the bytes the general encoder writes.
func TestReplayDeltasMatchSend(t *testing.T) {
	pieces := wire.Words(`Say "hi" <to> the wörld` + "\n\ttwice.")
	var slow, fast bytes.Buffer
	sw, fw := &eventWriter{w: &slow}, &eventWriter{w: &fast}
	for _, p := range pieces {
		sw.send("response.output_text.delta", "item_id", "msg_1", "output_index", int64(2), "content_index", int64(1), "delta", p, "logprobs", json.RawMessage(`[]`))
	}
	fw.deltas("response.output_text.delta", pieces, "item_id", "msg_1", "output_index", int64(2), "content_index", int64(1))
	if sw.err != nil || fw.err != nil || slow.String() != fast.String() || fw.seq != int64(len(pieces)) {
		t.Errorf("deltas differ from send (%v %v):\n%s\n%s", sw.err, fw.err, fast.String(), slow.String())
	}
}
