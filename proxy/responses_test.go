package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// responsesClient is the official SDK pointed at the sidecar with key.
func responsesClient(e *env, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.front.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func newResponsesEnv(t *testing.T) (*env, *fakeResponses) {
	t.Helper()
	e := newEnv(t, envOptions{})
	f := newFakeResponses()
	f.install(e)
	return e, f
}

func ask(text string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
}

func followUp(prev, text string) responses.ResponseNewParams {
	p := ask(text)
	p.PreviousResponseID = openai.String(prev)
	return p
}

// create sends p through the SDK and returns the response and the
// sidecar's cache outcome.
func create(t *testing.T, c openai.Client, p responses.ResponseNewParams) (*responses.Response, string) {
	t.Helper()
	var raw *http.Response
	r, err := c.Responses.New(context.Background(), p, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("responses.New: %v", err)
	}
	return r, raw.Header.Get(HeaderCache)
}

// streamed is what the SDK read from one streamed response.
type streamed struct {
	outcome string
	types   []string
	text    string // the output_text deltas, concatenated
	final   responses.Response
}

func createStream(t *testing.T, c openai.Client, p responses.ResponseNewParams) (streamed, error) {
	t.Helper()
	var raw *http.Response
	st := c.Responses.NewStreaming(context.Background(), p, option.WithResponseInto(&raw))
	defer st.Close()
	var out streamed
	var text strings.Builder
	for i := int64(0); st.Next(); i++ {
		ev := st.Current()
		if ev.SequenceNumber != i {
			t.Errorf("event %d (%s) has sequence_number %d", i, ev.Type, ev.SequenceNumber)
		}
		out.types = append(out.types, ev.Type)
		switch ev := ev.AsAny().(type) {
		case responses.ResponseTextDeltaEvent:
			text.WriteString(ev.Delta)
		case responses.ResponseCompletedEvent:
			out.final = ev.Response
		}
	}
	if raw != nil {
		out.outcome = raw.Header.Get(HeaderCache)
	}
	out.text = text.String()
	return out, st.Err()
}

// A repeat is answered from the cache with the provider's id, and that id
// still works as previous_response_id at the provider; a paraphrase in the
// same context is a semantic hit; another tenant never shares the entry.
func TestResponsesSDKMissHit(t *testing.T) {
	e, f := newResponsesEnv(t)
	a := responsesClient(e, "sk-tenant-a")

	first, outcome := create(t, a, ask("What is the capital of France?"))
	if outcome != OutcomeMiss || first.OutputText() != "answer to: What is the capital of France?" {
		t.Fatalf("first: outcome %q, text %q", outcome, first.OutputText())
	}
	again, outcome := create(t, a, ask("What is the capital of France?"))
	if outcome != OutcomeHitExact {
		t.Fatalf("repeat: outcome %q, want %s", outcome, OutcomeHitExact)
	}
	if again.ID != first.ID || again.OutputText() != first.OutputText() || again.Status != "completed" {
		t.Errorf("repeat: id %q text %q status %q, want the provider's %q", again.ID, again.OutputText(), again.Status, first.ID)
	}
	if n := f.creates.Load(); n != 1 {
		t.Fatalf("upstream created %d responses, want 1", n)
	}

	// The cached id is the provider's: a next turn on it works there.
	next, outcome := create(t, a, followUp(again.ID, "And its population?"))
	if outcome != OutcomeMiss || !strings.Contains(next.OutputText(), "(after "+first.ID+")") {
		t.Errorf("follow-up on the cached id: outcome %q, text %q", outcome, next.OutputText())
	}

	e.waitIndexed(2)
	para, outcome := create(t, a, ask("what is the capital of france"))
	if outcome != OutcomeHitSemantic || para.ID != first.ID {
		t.Errorf("paraphrase: outcome %q id %q, want %s with %q", outcome, para.ID, OutcomeHitSemantic, first.ID)
	}

	b := responsesClient(e, "sk-tenant-b")
	other, outcome := create(t, b, ask("What is the capital of France?"))
	if outcome != OutcomeMiss || other.ID == first.ID {
		t.Errorf("tenant b: outcome %q id %q, want a miss with its own id", outcome, other.ID)
	}
	if n := f.creates.Load(); n != 3 {
		t.Errorf("upstream created %d responses, want 3", n)
	}
}

// A follow-up is keyed on previous_response_id: the same words in another
// conversation are another question, exactly and semantically.
func TestResponsesSDKPreviousResponseIsolation(t *testing.T) {
	e, f := newResponsesEnv(t)
	c := responsesClient(e, "sk-tenant-a")
	convA, _ := create(t, c, ask("Tell me about lions."))
	convB, _ := create(t, c, ask("Tell me about sharks."))
	convC, _ := create(t, c, ask("Tell me about owls."))

	inA, outcome := create(t, c, followUp(convA.ID, "Why do they hunt at night?"))
	if outcome != OutcomeMiss || !strings.Contains(inA.OutputText(), convA.ID) {
		t.Fatalf("follow-up in A: outcome %q text %q", outcome, inA.OutputText())
	}
	e.waitIndexed(4)
	// The same words in B (exact tier), a paraphrase in C (semantic tier).
	for _, turn := range []struct{ conv, q string }{{convB.ID, "Why do they hunt at night?"}, {convC.ID, "why do they hunt at night"}} {
		got, outcome := create(t, c, followUp(turn.conv, turn.q))
		if outcome != OutcomeMiss || got.ID == inA.ID {
			t.Fatalf("follow-up %q on %s was answered from another conversation: outcome %q id %q", turn.q, turn.conv, outcome, got.ID)
		}
		if !strings.Contains(got.OutputText(), turn.conv) {
			t.Errorf("follow-up on %s: %q, want it to continue that conversation", turn.conv, got.OutputText())
		}
	}
	// Within A, the repeat and the paraphrase are served: same context.
	repeat, outcome := create(t, c, followUp(convA.ID, "Why do they hunt at night?"))
	if outcome != OutcomeHitExact || repeat.ID != inA.ID {
		t.Errorf("repeat in A: outcome %q id %q, want %s of %q", outcome, repeat.ID, OutcomeHitExact, inA.ID)
	}
	para, outcome := create(t, c, followUp(convA.ID, "why do they hunt at night"))
	if outcome != OutcomeHitSemantic || para.ID != inA.ID {
		t.Errorf("paraphrase in A: outcome %q id %q, want %s of %q", outcome, para.ID, OutcomeHitSemantic, inA.ID)
	}
	if n := f.creates.Load(); n != 6 {
		t.Errorf("upstream created %d responses, want 6", n)
	}
}

// A streamed miss is relayed and stored; a repeat is replayed as events the
// SDK reads; streams and JSON share entries both ways.
func TestResponsesSDKStreamReplay(t *testing.T) {
	e, f := newResponsesEnv(t)
	c := responsesClient(e, "sk-tenant-a")
	const q = "Name three primary colours, please."
	miss, err := createStream(t, c, ask(q))
	if err != nil {
		t.Fatalf("stream miss: %v", err)
	}
	want := "answer to: " + q
	if miss.outcome != OutcomeMiss || miss.text != want || miss.final.ID == "" {
		t.Fatalf("stream miss: outcome %q text %q id %q", miss.outcome, miss.text, miss.final.ID)
	}
	e.waitStreams()

	hit, err := createStream(t, c, ask(q))
	if err != nil {
		t.Fatalf("stream hit: %v", err)
	}
	if hit.outcome != OutcomeHitExact || hit.text != want {
		t.Fatalf("stream hit: outcome %q text %q", hit.outcome, hit.text)
	}
	if hit.final.ID != miss.final.ID || hit.final.OutputText() != want || hit.final.Status != "completed" {
		t.Errorf("replayed response.completed: id %q text %q status %q", hit.final.ID, hit.final.OutputText(), hit.final.Status)
	}
	if strings.Join(hit.types, ",") != strings.Join(miss.types, ",") {
		t.Errorf("replayed events\n %v\nwant the upstream's\n %v", hit.types, miss.types)
	}

	js, outcome := create(t, c, ask(q))
	if outcome != OutcomeHitExact || js.ID != miss.final.ID || js.OutputText() != want {
		t.Errorf("JSON after a stream: outcome %q id %q text %q", outcome, js.ID, js.OutputText())
	}

	first, _ := create(t, c, ask("Another question entirely?"))
	replayed, err := createStream(t, c, ask("Another question entirely?"))
	if err != nil || replayed.outcome != OutcomeHitExact || replayed.final.ID != first.ID || replayed.text != first.OutputText() {
		t.Errorf("stream after JSON: outcome %q id %q text %q err %v", replayed.outcome, replayed.final.ID, replayed.text, err)
	}
	if n := f.creates.Load(); n != 2 {
		t.Errorf("upstream created %d responses, want 2", n)
	}
}

// Only status "completed" is stored: incomplete answers, provider error
// events and cut streams are relayed and asked again next time; a cut
// stream ends with an error the SDK raises.
func TestResponsesNotStoredUnlessCompleted(t *testing.T) {
	e, f := newResponsesEnv(t)
	c := responsesClient(e, "sk-tenant-a")
	f.status = "incomplete"
	for i := range 2 {
		r, outcome := create(t, c, ask("Write a long poem."))
		if outcome != OutcomeMiss || r.Status != "incomplete" {
			t.Errorf("incomplete #%d: outcome %q status %q", i, outcome, r.Status)
		}
		s, err := createStream(t, c, ask("Write a long story."))
		if err != nil || s.outcome != OutcomeMiss || s.types[len(s.types)-1] != "response.incomplete" {
			t.Errorf("incomplete stream #%d: outcome %q events %v err %v", i, s.outcome, s.types, err)
		}
		e.waitStreams()
	}
	f.status = ""
	f.errorEvent = true
	for i := range 2 {
		s, _ := createStream(t, c, ask("Fail please."))
		if s.outcome != OutcomeMiss || s.types[len(s.types)-1] != "error" {
			t.Errorf("error event #%d: outcome %q events %v", i, s.outcome, s.types)
		}
		e.waitStreams()
	}
	f.errorEvent = false
	f.cutAfter = 2
	for i := range 2 {
		s, err := createStream(t, c, ask("Cut me off midway through."))
		var se *ssestream.StreamError
		if !errors.As(err, &se) || !strings.Contains(se.Message, "stream_interrupted") {
			t.Errorf("cut stream #%d: err %v, want the SDK's stream error", i, err)
		}
		if s.outcome != OutcomeMiss {
			t.Errorf("cut stream #%d: outcome %q", i, s.outcome)
		}
		e.waitStreams()
	}
	if n := f.creates.Load(); n != 8 {
		t.Errorf("upstream created %d responses, want 8 (nothing served from the cache)", n)
	}
}

// background and conversation requests, and every call on a stored
// response, pass through untouched and uncached.
func TestResponsesPassThrough(t *testing.T) {
	e, f := newResponsesEnv(t)
	c := responsesClient(e, "sk-tenant-a")
	bg := ask("Think about this for a while.")
	bg.Background = openai.Bool(true)
	q1, outcome := create(t, c, bg)
	if q1.Status != "queued" || outcome != OutcomeBypass {
		t.Fatalf("background: status %q outcome %q", q1.Status, outcome)
	}
	body := string(e.model.lastBody())
	q2, _ := create(t, c, bg)
	if q2.ID == q1.ID || f.creates.Load() != 2 {
		t.Errorf("a repeated background request was not sent upstream (ids %q %q)", q1.ID, q2.ID)
	}
	if got := string(e.model.lastBody()); got != body {
		t.Errorf("background body changed on the way:\n%s\n%s", got, body)
	}

	got, err := c.Responses.Get(context.Background(), q1.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != q1.ID {
		t.Fatalf("get: %v (id %v)", err, got)
	}
	if _, err := c.Responses.InputItems.List(context.Background(), q1.ID, responses.InputItemListParams{}); err != nil {
		t.Errorf("input items: %v", err)
	}
	cancelled, err := c.Responses.Cancel(context.Background(), q1.ID)
	if err != nil || cancelled.Status != "cancelled" {
		t.Errorf("cancel: %v (%v)", err, cancelled)
	}
	if err := c.Responses.Delete(context.Background(), q1.ID); err != nil {
		t.Errorf("delete: %v", err)
	}
	_, err = c.Responses.Get(context.Background(), q1.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("get after delete: %v, want the provider's 404", err)
	}
	if n := f.byID.Load(); n != 5 {
		t.Errorf("upstream saw %d calls by id, want 5", n)
	}

	conv := ask("Hello again")
	conv.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String("conv_1")}
	for range 2 {
		if _, outcome := create(t, c, conv); outcome != OutcomeBypass {
			t.Errorf("conversation: outcome %q, want %s", outcome, OutcomeBypass)
		}
	}
	if n := f.creates.Load(); n != 4 {
		t.Errorf("upstream created %d responses, want 4", n)
	}
}

// Errors reach the SDK in OpenAI's shape: the sidecar's own (a bad
// request), and the provider's (an unknown previous_response_id).
func TestResponsesErrors(t *testing.T) {
	e, _ := newResponsesEnv(t)
	c := responsesClient(e, "sk-tenant-a")
	r := e.post("/v1/responses", `{"model":"gpt-test","input":42}`, "Authorization", "Bearer sk-tenant-a")
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"type":"invalid_request_error"`) {
		t.Errorf("bad input: %d %s", r.status, r.body)
	}
	_, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" || !strings.Contains(apiErr.Message, "model") {
		t.Errorf("no model: %v", err)
	}
	_, err = c.Responses.New(context.Background(), followUp("resp_never_issued", "hi"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "previous_response_not_found" {
		t.Errorf("unknown previous id: %v", err)
	}

	// The upstream keeps failing: after the retries, the SDK gets an error
	// in OpenAI's shape, streamed or not, and nothing is stored.
	var calls atomic.Int64
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		calls.Add(1)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{"message": "overloaded", "type": "server_error", "code": nil}})
		return true
	}
	_, err = c.Responses.New(context.Background(), ask("Are you there?"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode < 500 || apiErr.Type != "server_error" {
		t.Errorf("upstream down: %v", err)
	}
	_, err = createStream(t, c, ask("Are you there?"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode < 500 || apiErr.Type != "server_error" {
		t.Errorf("upstream down, streamed: %v", err)
	}
	if calls.Load() < 2 {
		t.Errorf("upstream called %d times", calls.Load())
	}
}

// Models of one cache group share chat answers but never responses: the
// response id belongs to the provider that served the model asked for.
func TestResponsesNoCrossModelSharing(t *testing.T) {
	e := newEnv(t, envOptions{proxy: func(o *Options) { o.Group = func(string) string { return "one-group" } }})
	f := newFakeResponses()
	f.install(e)
	c := responsesClient(e, "sk-tenant-a")
	first, _ := create(t, c, ask("What is the boiling point of water?"))
	e.waitIndexed(1)
	other := ask("What is the boiling point of water?")
	other.Model = "gpt-other"
	got, outcome := create(t, c, other)
	if outcome != OutcomeMiss || got.ID == first.ID {
		t.Errorf("another model of the group: outcome %q id %q, want a miss", outcome, got.ID)
	}
	if n := f.creates.Load(); n != 2 {
		t.Errorf("upstream created %d responses, want 2", n)
	}
}
