package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// storedResponse is a completed response with one item of every kind the
// replay treats apart: reasoning with a summary, a message with text (with
// an annotation) and a refusal, a function call, and a built-in tool call.
const storedResponse = `{"id":"resp_abc","object":"response","created_at":1700000000,"status":"completed","background":false,
"error":null,"incomplete_details":null,"instructions":"Be brief.","metadata":{},"model":"gpt-test-2025",
"parallel_tool_calls":true,"previous_response_id":"resp_prev","temperature":1,"tool_choice":"auto","top_p":1,
"text":{"format":{"type":"text"}},"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"},"strict":true}],
"output":[
 {"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Thinking about Paris weather."}]},
 {"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[
   {"type":"output_text","text":"Paris is sunny today, 21 °C <b>warm</b>.","annotations":[{"type":"url_citation","start_index":0,"end_index":5,"url":"https://example.com","title":"x"}],"logprobs":[]},
   {"type":"refusal","refusal":"I can't share more."}]},
 {"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
 {"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"paris weather"}}],
"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":30}}`

func sdkStream(body []byte) *ssestream.Stream[responses.ResponseStreamEventUnion] {
	res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
	return ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
}

// The replay is read by the official SDK event by event: every event
// decodes to its typed form, sequence numbers count from 0, the deltas add
// up to the stored text, arguments and summary, and response.completed
// carries the stored response, provider id included.
func TestReplayResponseSDK(t *testing.T) {
	var out bytes.Buffer
	flushes := 0
	if err := replayResponse(&out, func() { flushes++ }, []byte(storedResponse)); err != nil {
		t.Fatal(err)
	}
	st := sdkStream(out.Bytes())
	var text, refusal, args, summary strings.Builder
	var types []string
	var final responses.Response
	var n int64
	for ; st.Next(); n++ {
		ev := st.Current()
		if ev.SequenceNumber != n {
			t.Errorf("event %d (%s): sequence_number %d", n, ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev := ev.AsAny().(type) {
		case responses.ResponseCreatedEvent:
			if ev.Response.ID != "resp_abc" || ev.Response.Status != "in_progress" || len(ev.Response.Output) != 0 {
				t.Errorf("response.created: id %q status %q output %d", ev.Response.ID, ev.Response.Status, len(ev.Response.Output))
			}
		case responses.ResponseTextDeltaEvent:
			if ev.ItemID != "msg_1" || ev.OutputIndex != 1 || ev.ContentIndex != 0 {
				t.Errorf("text delta at %s/%d/%d", ev.ItemID, ev.OutputIndex, ev.ContentIndex)
			}
			text.WriteString(ev.Delta)
		case responses.ResponseRefusalDeltaEvent:
			refusal.WriteString(ev.Delta)
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			args.WriteString(ev.Delta)
		case responses.ResponseReasoningSummaryTextDeltaEvent:
			summary.WriteString(ev.Delta)
		case responses.ResponseOutputItemAddedEvent:
			if ev.Item.ID == "" {
				t.Errorf("output_item.added %d without the provider's item id", ev.OutputIndex)
			}
		case responses.ResponseCompletedEvent:
			final = ev.Response
		case nil:
			t.Errorf("event %q is not one the SDK knows", ev)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("the SDK rejected the replay: %v", err)
	}
	if int(n) != flushes {
		t.Errorf("%d events, %d flushes", n, flushes)
	}
	if got := text.String(); got != "Paris is sunny today, 21 °C <b>warm</b>." {
		t.Errorf("text deltas: %q", got)
	}
	if refusal.String() != "I can't share more." || args.String() != `{"city":"Paris"}` || summary.String() != "Thinking about Paris weather." {
		t.Errorf("refusal %q args %q summary %q", refusal.String(), args.String(), summary.String())
	}
	if types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Errorf("events: %v", types)
	}
	if final.ID != "resp_abc" || final.Status != "completed" || !jsonEqual(t, []byte(final.RawJSON()), []byte(storedResponse)) {
		t.Errorf("response.completed differs from the stored response: %s", final.RawJSON())
	}
}

// Relaying a stream through the assembler rebuilds the body a non-stream
// request gets: the replay of a stored response assembles back to it.
func TestResponsesStreamRoundTrip(t *testing.T) {
	var out bytes.Buffer
	if err := replayResponse(&out, nil, []byte(storedResponse)); err != nil {
		t.Fatal(err)
	}
	asm, relayed := feedResponses(t, out.Bytes())
	if !asm.Complete() || !asm.FinishedAtEOF() {
		t.Fatalf("complete %v finished %v", asm.Complete(), asm.FinishedAtEOF())
	}
	if !bytes.Equal(relayed, out.Bytes()) {
		t.Error("the relayed bytes differ from the upstream's")
	}
	body, err := asm.Body()
	if err != nil || !jsonEqual(t, body, []byte(storedResponse)) {
		t.Errorf("assembled body (%v): %s", err, body)
	}
	if !responsesFormat.Finished(body) {
		t.Error("the assembled body is not storable")
	}
	if asm.Partial() != "Paris is sunny today, 21 °C <b>warm</b>." {
		t.Errorf("partial %q", asm.Partial())
	}

	// A provider that leaves the output out of response.completed: the
	// output is rebuilt from the output_item.done events.
	var stripped bytes.Buffer
	rd := newSSEReader(bytes.NewReader(out.Bytes()))
	for {
		ev, raw, err := rd.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("event: response.completed")) {
			var e map[string]map[string]any
			_ = json.Unmarshal(ev.Data, &e)
			e["response"]["output"] = nil
			b, _ := json.Marshal(e)
			raw = []byte("event: response.completed\ndata: " + string(b) + "\n\n")
		}
		stripped.Write(raw)
	}
	asm, _ = feedResponses(t, stripped.Bytes())
	body, err = asm.Body()
	if err != nil || !jsonEqual(t, body, []byte(storedResponse)) {
		t.Errorf("body rebuilt from output items (%v): %s", err, body)
	}
}

func feedResponses(t *testing.T, stream []byte) (StreamAssembler, []byte) {
	t.Helper()
	asm := newResponsesStream()
	var relayed bytes.Buffer
	rd := newSSEReader(bytes.NewReader(stream))
	for {
		ev, raw, err := rd.next()
		if errors.Is(err, io.EOF) {
			return asm, relayed.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		out, end, err := asm.Feed(ev, raw, false)
		if err != nil {
			t.Fatal(err)
		}
		relayed.Write(out)
		if end {
			return asm, relayed.Bytes()
		}
	}
}

// Streams that end in anything but response.completed are relayed whole and
// never stored; an unreadable event cuts the stream.
func TestResponsesStreamEnds(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	created := ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`)
	cases := map[string]string{
		"incomplete": created + ev("response.incomplete", `{"type":"response.incomplete","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"incomplete","output":[]}}`),
		"failed":     created + ev("response.failed", `{"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"x"},"output":[]}}`),
		"error":      created + ev("error", `{"type":"error","sequence_number":1,"code":"rate_limit_exceeded","message":"slow down","param":null}`),
		"untyped":    created + `data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n",
	}
	for name, stream := range cases {
		asm, relayed := feedResponses(t, []byte(stream))
		if asm.Complete() {
			t.Errorf("%s: complete", name)
		}
		if !asm.FinishedAtEOF() {
			t.Errorf("%s: the stream did not end", name)
		}
		if string(relayed) != stream {
			t.Errorf("%s: relayed %q", name, relayed)
		}
		if _, err := asm.Body(); err == nil {
			t.Errorf("%s: a body for a stream that did not complete", name)
		}
	}
	asm, _ := feedResponses(t, []byte(created))
	if asm.FinishedAtEOF() || asm.Complete() {
		t.Error("a stream without a terminal event counts as finished")
	}
	if _, _, err := newResponsesStream().Feed(sseEvent{Event: "response.created", Data: []byte("{not json")}, nil, false); err == nil {
		t.Error("an unreadable event was accepted")
	}
}

func TestResponsesFinished(t *testing.T) {
	cases := map[string]bool{
		`{"id":"resp_1","object":"response","status":"completed","error":null,"output":[]}`:                        true,
		`{"id":"resp_1","object":"response","status":"incomplete","error":null}`:                                   false,
		`{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error"}}`:                    false,
		`{"id":"resp_1","object":"response","status":"in_progress"}`:                                               false,
		`{"id":"resp_1","object":"response","status":"queued","background":true}`:                                  false,
		`{"id":"resp_1","object":"response","status":"completed","background":true}`:                               false,
		`{"id":"resp_1","object":"response","status":"cancelled"}`:                                                 false,
		`{"id":"resp_1","object":"response","status":"completed","error":{"code":"x"}}`:                            false,
		`{"id":"resp_1","object":"response","status":"incomplete","Status":"completed"}`:                           false,
		`{"id":"resp_1","object":"response","Status":"completed"}`:                                                 false,
		`{"object":"response","status":"completed"}`:                                                               false,
		`{"id":"chatcmpl-1","object":"chat.completion","status":"completed","choices":[{"finish_reason":"stop"}]}`: false,
		`not json`: false,
	}
	for body, want := range cases {
		if got := responsesFormat.Finished([]byte(body)); got != want {
			t.Errorf("Finished(%s) = %v, want %v", body, got, want)
		}
	}
}

// A cut stream's last event is raised by the SDK as an error, and read as
// the API's typed "error" event by a client that asks for events.
func TestResponsesStreamErrorSDK(t *testing.T) {
	ev := responsesFormat.StreamError(errors.New("the upstream closed the stream before it finished"))
	st := sdkStream(ev)
	if st.Next() {
		t.Fatal("the SDK read the error event as an event")
	}
	var se *ssestream.StreamError
	if !errors.As(st.Err(), &se) || !strings.Contains(se.Message, "stream_interrupted") {
		t.Errorf("SDK error: %v", st.Err())
	}
	st = sdkStream(ev).WithEventsMode()
	if !st.Next() {
		t.Fatalf("events mode: %v", st.Err())
	}
	e, ok := st.Current().AsAny().(responses.ResponseErrorEvent)
	if !ok || e.Code != "stream_interrupted" || !strings.Contains(e.Message, "closed the stream") {
		t.Errorf("events mode: %#v", st.Current().AsAny())
	}
	status, body := responsesFormat.Error(http.StatusTooManyRequests, "rate_limited", "slow down")
	if status != http.StatusTooManyRequests || !jsonEqual(t, body, []byte(`{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limited"}}`)) {
		t.Errorf("error body %d %s", status, body)
	}
}

// BenchmarkReplayResponse1000Tokens: replaying a stored 1,000-token
// Responses answer as its event stream (into io.Discard), next to the Chat
// Completions replay of the same text for the ratio.
func BenchmarkReplayResponse1000Tokens(b *testing.B) {
	answer, chatStored := thousandTokens()
	stored, _ := json.Marshal(map[string]any{"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-test",
		"output": []any{map[string]any{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": answer, "annotations": []any{}, "logprobs": []any{}}}}}})
	b.Run("responses", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := replayResponse(io.Discard, func() {}, stored); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := replay(io.Discard, func() {}, chatStored, "chatcmpl-bwbench", 1700000000, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
