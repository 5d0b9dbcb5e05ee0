package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// A stored message replayed as events and assembled again is the same
// message, for every block type the replay streams in pieces.
func TestMessageReplayRoundTrip(t *testing.T) {
	stored := `{"id":"msg_1","type":"message","role":"assistant","model":"claude","stop_reason":"tool_use","stop_sequence":null,
	"content":[
	 {"type":"thinking","thinking":"Let me think about the weather.","signature":"c2ln"},
	 {"type":"redacted_thinking","data":"b3BhcXVl"},
	 {"type":"text","text":"Paris is sunny, says the source.","citations":[{"type":"char_location","cited_text":"sunny","document_index":0,"document_title":null,"start_char_index":0,"end_char_index":5}]},
	 {"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris","days":[1,2]}}],
	"usage":{"input_tokens":12,"output_tokens":40,"cache_read_input_tokens":0}}`
	var buf bytes.Buffer
	if err := replayMessage(&buf, nil, []byte(stored)); err != nil {
		t.Fatal(err)
	}
	asm := newMessageStream()
	rd := newSSEReader(&buf)
	for {
		ev, raw, err := rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Event == "" {
			t.Fatalf("event without a name (the Go SDK skips those): %s", raw)
		}
		if _, _, err := asm.Feed(ev, raw, false); err != nil {
			t.Fatal(err)
		}
	}
	if !asm.Complete() {
		t.Fatal("replayed stream is not complete")
	}
	body, err := asm.Body()
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	_ = json.Unmarshal(body, &got)
	_ = json.Unmarshal([]byte(stored), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip = %s\nwant %s", body, stored)
	}
}

func TestMessagesFinished(t *testing.T) {
	for body, want := range map[string]bool{
		`{"type":"message","role":"assistant","content":[],"stop_reason":"end_turn"}`:      true,
		`{"type":"message","role":"assistant","content":[],"stop_reason":"stop_sequence"}`: true,
		`{"type":"message","role":"assistant","content":[],"stop_reason":"tool_use"}`:      true,
		`{"type":"message","role":"assistant","content":[],"stop_reason":"max_tokens"}`:    true,
		`{"type":"message","role":"assistant","content":[],"stop_reason":"refusal"}`:       false,
		`{"type":"message","role":"assistant","content":[],"stop_reason":"pause_turn"}`:    false,
		`{"type":"message","role":"assistant","content":[],"stop_reason":null}`:            false,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`:      false,
	} {
		if got := messagesFormat.Finished([]byte(body)); got != want {
			t.Errorf("Finished(%s) = %v, want %v", body, got, want)
		}
	}
}

// A stream that closes without message_stop, or sends an error event, is
// cut: never complete.
func TestMessageStreamCut(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	for name, tail := range map[string]string{
		"closed": "",
		"error":  "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
	} {
		asm := newMessageStream()
		rd := newSSEReader(bytes.NewReader([]byte(stream + tail)))
		var cut error
		for cut == nil {
			ev, raw, err := rd.next()
			if err != nil {
				break
			}
			_, _, cut = asm.Feed(ev, raw, false)
		}
		if name == "error" && cut == nil {
			t.Errorf("%s: error event not reported as a cut", name)
		}
		if asm.Complete() || asm.FinishedAtEOF() || asm.Partial() != "Hi" {
			t.Errorf("%s: complete %v, finished at EOF %v, partial %q", name, asm.Complete(), asm.FinishedAtEOF(), asm.Partial())
		}
	}
}
