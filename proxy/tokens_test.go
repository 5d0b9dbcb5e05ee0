package proxy

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/proxy/flow"
)

// usageAPI is one wire API as the token tests drive it: its request body,
// path, and what its fake upstream reports as usage, in its own shape.
type usageAPI struct {
	name   string
	path   func(stream bool) string
	body   func(question string, stream bool) string
	in     uint64 // what the API's usage adds up to
	out    uint64
	answer func(w http.ResponseWriter, stream bool, question string)
}

// The usage each fake reports. Messages' input adds cache reads to
// input_tokens; Gemini's output adds thinking tokens to the candidates'.
var usageAPIs = []usageAPI{
	{
		name: "chat", in: 11, out: 22,
		path: func(bool) string { return "/v1/chat/completions" },
		body: func(q string, stream bool) string {
			return fmt.Sprintf(`{"model":"gpt-test","temperature":0,"stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, q)
		},
		answer: func(w http.ResponseWriter, stream bool, q string) {
			usage := map[string]any{"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}
			if !stream {
				c := completion(map[string]any{"model": "gpt-test"}, "answer to: "+q)
				c["usage"] = usage
				writeJSON(w, 200, c)
				return
			}
			sse(w, "", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
				"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "answer to: " + q}, "finish_reason": nil}}})
			sse(w, "", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
				"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
			sse(w, "", map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test", "choices": []any{}, "usage": usage})
			fmt.Fprint(w, "data: [DONE]\n\n")
		},
	},
	{
		name: "messages", in: 35, out: 17,
		path: func(bool) string { return "/v1/messages" },
		body: func(q string, stream bool) string {
			return fmt.Sprintf(`{"model":"gpt-test","max_tokens":100,"temperature":0,"stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, q)
		},
		answer: func(w http.ResponseWriter, stream bool, q string) {
			msg := map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "gpt-test",
				"content": []any{map[string]any{"type": "text", "text": "answer to: " + q}}, "stop_reason": "end_turn", "stop_sequence": nil,
				"usage": map[string]any{"input_tokens": 30, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 0, "output_tokens": 17}}
			if !stream {
				writeJSON(w, 200, msg)
				return
			}
			start := map[string]any{}
			for k, v := range msg {
				start[k] = v
			}
			start["content"], start["stop_reason"] = []any{}, nil
			start["usage"] = map[string]any{"input_tokens": 30, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 0, "output_tokens": 1}
			sse(w, "message_start", map[string]any{"type": "message_start", "message": start})
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "answer to: " + q}})
			sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
				"usage": map[string]any{"output_tokens": 17}})
			sse(w, "message_stop", map[string]any{"type": "message_stop"})
		},
	},
	{
		name: "responses", in: 13, out: 29,
		path: func(bool) string { return "/v1/responses" },
		body: func(q string, stream bool) string {
			return fmt.Sprintf(`{"model":"gpt-test","temperature":0,"stream":%t,"input":%q}`, stream, q)
		},
		answer: func(w http.ResponseWriter, stream bool, q string) {
			f := &fakeResponses{stored: map[string]map[string]any{}}
			rec := &usageRewriter{ResponseWriter: w, from: `"usage":{"input_tokens":5,"output_tokens":5,"total_tokens":10}`,
				to: `"usage":{"input_tokens":13,"input_tokens_details":{"cached_tokens":3},"output_tokens":29,"total_tokens":42}`}
			f.create(rec, map[string]any{"model": "gpt-test", "stream": stream, "input": q})
		},
	},
	{
		name: "gemini", in: 7, out: 22,
		path: func(stream bool) string {
			if stream {
				return "/v1beta/models/gpt-test:streamGenerateContent?alt=sse"
			}
			return "/v1beta/models/gpt-test:generateContent"
		},
		body: func(q string, _ bool) string {
			return fmt.Sprintf(`{"contents":[{"role":"user","parts":[{"text":%q}]}],"generationConfig":{"temperature":0}}`, q)
		},
		answer: func(w http.ResponseWriter, stream bool, q string) {
			usage := map[string]any{"promptTokenCount": 7, "candidatesTokenCount": 19, "thoughtsTokenCount": 3, "totalTokenCount": 29}
			a := geminiAnswer("gpt-test", "answer to: "+q, "STOP")
			a["usageMetadata"] = usage
			if !stream {
				writeJSON(w, 200, a)
				return
			}
			first := geminiAnswer("gpt-test", "answer", "")
			delete(first["candidates"].([]any)[0].(map[string]any), "finishReason")
			first["usageMetadata"] = map[string]any{"promptTokenCount": 7, "totalTokenCount": 7}
			sse(w, "", first)
			a["candidates"].([]any)[0].(map[string]any)["content"] = map[string]any{"parts": []any{map[string]any{"text": " to: " + q}}, "role": "model"}
			sse(w, "", a)
		},
	},
}

// usageRewriter replaces the Responses fake's fixed usage with the test's.
type usageRewriter struct {
	http.ResponseWriter
	from, to string
}

func (u *usageRewriter) Write(b []byte) (int, error) {
	_, err := u.ResponseWriter.Write([]byte(strings.ReplaceAll(string(b), u.from, u.to)))
	return len(b), err
}

func (u *usageRewriter) Flush() { u.ResponseWriter.(http.Flusher).Flush() }

func sse(w http.ResponseWriter, event string, v any) {
	w.Header().Set("Content-Type", "text/event-stream")
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

// usageQuestion reads the question out of any of the four request bodies.
func usageQuestion(body map[string]any) string {
	if q := lastUser(body); q != "" {
		return q
	}
	if q, ok := body["input"].(string); ok {
		return q
	}
	contents, _ := body["contents"].([]any)
	for _, c := range contents {
		parts, _ := c.(map[string]any)["parts"].([]any)
		for _, p := range parts {
			if s, ok := p.(map[string]any)["text"].(string); ok {
				return s
			}
		}
	}
	return ""
}

// tokensOf is the /stats tokens of model (zero when absent) and of every
// tenant together.
func tokensOf(t *testing.T, e *env, model string) (m TokenEntry, tenants TokenEntry, st TokenStats) {
	t.Helper()
	r := e.get("/stats")
	var s Stats
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatalf("stats: %v: %s", err, r.body)
	}
	for _, me := range s.Tokens.Models {
		if me.Name == model {
			m = me
		}
	}
	for _, te := range s.Tokens.Tenants {
		if strings.Contains(te.Name, "sk-") {
			t.Errorf("a tenant is named by its key: %q", te.Name)
		}
		tenants.Saved.Input += te.Saved.Input
		tenants.Saved.Output += te.Saved.Output
		tenants.Spent.Input += te.Spent.Input
		tenants.Spent.Output += te.Spent.Output
	}
	return m, tenants, s.Tokens
}

// tokensWhen polls /stats until model's saved and spent tokens are as
// wanted: a request is counted after its last byte is written (a stream's
// relay or replay), so its client may ask first.
func tokensWhen(t *testing.T, e *env, model string, saved, spent TokenCount) (TokenEntry, TokenEntry, TokenStats) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, ten, st := tokensOf(t, e, model)
		if m.Saved == saved && m.Spent == spent {
			return m, ten, st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s %s saved %+v spent %+v, want %+v and %+v", model, m.Saved, m.Spent, saved, spent)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTokensSavedAndSpent: for each API, streamed and not, a miss counts
// the upstream's usage as spent; an exact hit, a semantic hit and a
// coalesced follower count the same numbers as saved, and every hit says
// so in X-Breakwater-Tokens-Saved while its body's usage is the provider's.
func TestTokensSavedAndSpent(t *testing.T) {
	for _, api := range usageAPIs {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%t", api.name, stream), func(t *testing.T) {
				var (
					mu   sync.Mutex
					gate = map[string]chan struct{}{}
				)
				e := newEnv(t, envOptions{threshold: 0.8})
				e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
					q := usageQuestion(body)
					mu.Lock()
					ch := gate[q]
					mu.Unlock()
					if ch != nil {
						<-ch
					}
					api.answer(w, stream, q)
					return true
				}
				auth := []string{"Authorization", "Bearer sk-tenant-a"}
				post := func(q string) reply {
					return e.post(api.path(stream), api.body(q, stream), auth...)
				}
				want := TokenCount{Input: api.in, Output: api.out}
				wantHeader := fmt.Sprintf("%d,%d", api.in, api.out)

				miss := post("How do I reset my password?")
				if miss.status != 200 || miss.header.Get(HeaderCache) != OutcomeMiss {
					t.Fatalf("miss: %d %q: %s", miss.status, miss.header.Get(HeaderCache), miss.body)
				}
				if h := miss.header.Get(HeaderTokensSaved); h != "" {
					t.Errorf("a miss says it saved %q", h)
				}
				e.waitStreams()
				m, ten, _ := tokensWhen(t, e, "gpt-test", TokenCount{}, want)
				if m.Spent != want || m.Saved != (TokenCount{}) {
					t.Fatalf("after a miss: spent %+v saved %+v, want spent %+v", m.Spent, m.Saved, want)
				}
				if ten.Spent != want {
					t.Errorf("after a miss the tenants spent %+v, want %+v", ten.Spent, want)
				}

				hit := post("How do I reset my password?")
				if hit.header.Get(HeaderCache) != OutcomeHitExact {
					t.Fatalf("repeat: %q, want %q", hit.header.Get(HeaderCache), OutcomeHitExact)
				}
				if h := hit.header.Get(HeaderTokensSaved); h != wantHeader {
					t.Errorf("exact hit %s = %q, want %q", HeaderTokensSaved, h, wantHeader)
				}
				if !stream && !jsonUsageEqual(t, hit.body, miss.body, api.name) {
					t.Errorf("the hit's usage is not the provider's: %s vs %s", hit.body, miss.body)
				}
				m, _, _ = tokensWhen(t, e, "gpt-test", want, want)
				if m.Saved != want || m.Spent != want {
					t.Fatalf("after an exact hit: saved %+v spent %+v, want both %+v", m.Saved, m.Spent, want)
				}

				e.waitIndexed(1)
				para := post("How can I reset my password?")
				if para.header.Get(HeaderCache) != OutcomeHitSemantic {
					t.Fatalf("paraphrase: %q, want %q", para.header.Get(HeaderCache), OutcomeHitSemantic)
				}
				if h := para.header.Get(HeaderTokensSaved); h != wantHeader {
					t.Errorf("semantic hit %s = %q, want %q", HeaderTokensSaved, h, wantHeader)
				}
				m, _, _ = tokensWhen(t, e, "gpt-test", TokenCount{Input: 2 * api.in, Output: 2 * api.out}, want)
				if two := (TokenCount{Input: 2 * api.in, Output: 2 * api.out}); m.Saved != two || m.Spent != want {
					t.Fatalf("after a semantic hit: saved %+v spent %+v, want %+v and %+v", m.Saved, m.Spent, two, want)
				}

				// Two identical questions at once: one upstream call, the
				// follower counts the answer as saved.
				q := "What is the boiling point of water at sea level?"
				ch := make(chan struct{})
				mu.Lock()
				gate[q] = ch
				mu.Unlock()
				var wg sync.WaitGroup
				replies := make([]reply, 2)
				for i := range replies {
					wg.Add(1)
					go func() {
						defer wg.Done()
						replies[i] = post(q)
					}()
				}
				waitCoalesced(t, e, stream, 2)
				close(ch)
				wg.Wait()
				followers := 0
				for _, r := range replies {
					if r.header.Get("X-Breakwater-Coalesced") == "true" {
						followers++
						if !stream && r.header.Get(HeaderTokensSaved) != wantHeader {
							t.Errorf("coalesced follower %s = %q, want %q", HeaderTokensSaved, r.header.Get(HeaderTokensSaved), wantHeader)
						}
					}
				}
				if followers != 1 {
					t.Fatalf("%d coalesced followers, want 1", followers)
				}
				e.waitStreams()
				three, two := TokenCount{Input: 3 * api.in, Output: 3 * api.out}, TokenCount{Input: 2 * api.in, Output: 2 * api.out}
				m, ten, st := tokensWhen(t, e, "gpt-test", three, two)
				if m.Saved != three || m.Spent != two {
					t.Fatalf("after a coalesced pair: saved %+v spent %+v, want %+v and %+v", m.Saved, m.Spent, three, two)
				}
				if ten.Saved != three || ten.Spent != two || len(st.Tenants) != 1 {
					t.Errorf("tenants: %+v, want one tenant with saved %+v spent %+v", st.Tenants, three, two)
				}
				if st.CostSavedUSD != nil {
					t.Errorf("a cost without prices: %v", *st.CostSavedUSD)
				}
				met := e.get("/stats")
				if !strings.Contains(string(met.body), `"tokens_saved":{"input":`+fmt.Sprint(3*api.in)) {
					t.Errorf("the timeline does not show %d input tokens saved: %s", 3*api.in, met.body)
				}
			})
		}
	}
}

// jsonUsageEqual reports whether two answers of api carry the same usage.
func jsonUsageEqual(t *testing.T, a, b []byte, api string) bool {
	t.Helper()
	field := "usage"
	if api == "gemini" {
		field = "usageMetadata"
	}
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return false
	}
	return len(ma[field]) > 0 && jsonEqual(t, ma[field], mb[field])
}

// waitCoalesced waits until n clients wait on one flight (JSON) or one
// broadcast (stream).
func waitCoalesced(t *testing.T, e *env, stream bool, n int) {
	t.Helper()
	if !stream {
		e.waitWaiters(n)
		return
	}
	count := func() int {
		return e.server.flow.StreamWaiters()
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d stream waiters after 10s, want %d", count(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestCostSaved: with prices configured, /stats shows cost saved = tokens
// saved × price, per model, per tenant and in total; a model without a
// price has tokens and no cost.
func TestCostSaved(t *testing.T) {
	price := Price{Input: 2.5, Output: 10}
	e := newEnv(t, envOptions{proxy: func(o *Options) { o.Prices = map[string]Price{"gpt-test": price} }})
	api := usageAPIs[0] // Chat: 11 in, 22 out
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		api.answer(w, false, usageQuestion(body))
		return true
	}
	for range 3 { // a miss, then two exact hits
		if r := e.post(api.path(false), api.body("What does a sidecar cost?", false), "Authorization", "Bearer sk-a"); r.status != 200 {
			t.Fatalf("%d: %s", r.status, r.body)
		}
	}
	m, _, st := tokensOf(t, e, "gpt-test")
	if want := (TokenCount{Input: 2 * api.in, Output: 2 * api.out}); m.Saved != want {
		t.Fatalf("saved %+v, want %+v", m.Saved, want)
	}
	wantSaved := (float64(2*api.in)*price.Input + float64(2*api.out)*price.Output) / 1e6
	wantSpent := (float64(api.in)*price.Input + float64(api.out)*price.Output) / 1e6
	near := func(got *float64, want float64) bool { return got != nil && math.Abs(*got-want) < 1e-9 }
	if !near(m.CostSavedUSD, wantSaved) || !near(m.CostSpentUSD, wantSpent) {
		t.Errorf("model cost saved %v spent %v, want %v and %v", m.CostSavedUSD, m.CostSpentUSD, wantSaved, wantSpent)
	}
	if !near(st.CostSavedUSD, wantSaved) {
		t.Errorf("total cost saved %v, want %v", st.CostSavedUSD, wantSaved)
	}
	if len(st.Tenants) != 1 || !near(st.Tenants[0].CostSavedUSD, wantSaved) {
		t.Errorf("tenants %+v, want one that saved %v", st.Tenants, wantSaved)
	}
	// An answer from a model without a price: tokens, no cost.
	e.server.obs.Finished(&flow.Record{Outcome: OutcomeMiss, Called: true, UsageModel: "unpriced", Usage: Usage{Input: 1, Output: 2, Known: true}, End: time.Now()})
	_, _, st = tokensOf(t, e, "gpt-test")
	for _, me := range st.Models {
		if me.Name == "unpriced" && (me.CostSpentUSD != nil || me.Spent != (TokenCount{Input: 1, Output: 2})) {
			t.Errorf("unpriced model: %+v, want tokens and no cost", me)
		}
	}
	if !near(st.CostSpentUSD, wantSpent) {
		t.Errorf("total cost spent %v, want %v (an unpriced model adds nothing)", st.CostSpentUSD, wantSpent)
	}
}

// TestGenAIMetrics: each upstream call is counted in the GenAI client
// metrics (token usage by type, operation duration; time to first chunk
// for a stream), and every token of breakwater_tokens_total is labelled
// by model, direction and outcome.
func TestGenAIMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, envOptions{proxy: func(o *Options) { o.Metrics = NewMetrics(reg) }})
	api := usageAPIs[1] // Messages: 35 in, 17 out
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		stream, _ := body["stream"].(bool)
		api.answer(w, stream, usageQuestion(body))
		return true
	}
	for _, stream := range []bool{false, true} {
		if r := e.post(api.path(stream), api.body(fmt.Sprint("question, streamed: ", stream), stream)); r.status != 200 {
			t.Fatalf("%d: %s", r.status, r.body)
		}
	}
	e.waitStreams()
	if r := e.post(api.path(false), api.body("question, streamed: false", false)); r.header.Get(HeaderCache) != OutcomeHitExact {
		t.Fatalf("repeat: %q", r.header.Get(HeaderCache))
	}
	// Counted when each request finished (a stream after its last byte).
	tokensWhen(t, e, "gpt-test", TokenCount{Input: api.in, Output: api.out}, TokenCount{Input: 2 * api.in, Output: 2 * api.out})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ name, labels string }
	got := map[key]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			k := key{f.GetName(), strings.Join(ls, ",")}
			switch {
			case m.GetHistogram() != nil:
				got[key{k.name + ":count", k.labels}] = float64(m.GetHistogram().GetSampleCount())
				got[key{k.name + ":sum", k.labels}] = m.GetHistogram().GetSampleSum()
			case m.GetCounter() != nil:
				got[k] = m.GetCounter().GetValue()
			}
		}
	}
	gen := "gen_ai_operation_name=chat,gen_ai_provider_name=anthropic,gen_ai_request_model=gpt-test"
	for k, want := range map[key]float64{
		{"gen_ai_client_token_usage:count", gen + ",gen_ai_token_type=input"}:                    2,
		{"gen_ai_client_token_usage:sum", gen + ",gen_ai_token_type=input"}:                      2 * float64(api.in),
		{"gen_ai_client_token_usage:sum", gen + ",gen_ai_token_type=output"}:                     2 * float64(api.out),
		{"gen_ai_client_operation_duration_seconds:count", "error_type=," + gen}:                 2,
		{"gen_ai_client_operation_time_to_first_chunk_seconds:count", gen}:                       1,
		{"breakwater_tokens_total", "direction=input,model=gpt-test,outcome=miss"}:               2 * float64(api.in),
		{"breakwater_tokens_total", "direction=output,model=gpt-test,outcome=miss"}:              2 * float64(api.out),
		{"breakwater_tokens_total", "direction=input,model=gpt-test,outcome=" + OutcomeHitExact}: float64(api.in),
	} {
		if got[k] != want {
			t.Errorf("%s{%s} = %v, want %v", k.name, k.labels, got[k], want)
		}
	}
}

// TestStaleAnswerCountsSaved: a stale answer served while every target is
// down reuses a stored answer, so its tokens count as saved (the fake
// model's usage: 5 and 5).
func TestStaleAnswerCountsSaved(t *testing.T) {
	e, down, _ := staleEnv(t, true)
	seedStale(t, e, down)
	r := e.post("/v1/chat/completions", chat(staleParaphrase))
	if r.header.Get(HeaderCache) != OutcomeStale {
		t.Fatalf("paraphrase while down: %d %q, want %q", r.status, r.header.Get(HeaderCache), OutcomeStale)
	}
	if h := r.header.Get(HeaderTokensSaved); h != "5,5" {
		t.Errorf("stale %s = %q, want \"5,5\"", HeaderTokensSaved, h)
	}
	m, _, _ := tokensOf(t, e, "gpt-test")
	if m.Saved != (TokenCount{Input: 5, Output: 5}) || m.Spent != (TokenCount{Input: 5, Output: 5}) {
		t.Errorf("saved %+v spent %+v, want 5,5 each", m.Saved, m.Spent)
	}
}
