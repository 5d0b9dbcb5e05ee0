package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// Both SDK generations: Authorization: Bearer with the SDK's own version
// header, and x-api-key with 2023-06-01.
var sdkStyles = []struct {
	name   string
	bearer bool
}{{"bearer", true}, {"x-api-key", false}}

func TestMessagesExactAndSemanticHits(t *testing.T) {
	for _, style := range sdkStyles {
		t.Run(style.name, func(t *testing.T) {
			ce := newClaudeEnv(t, envOptions{threshold: 0.8})
			var tap headerTap
			client := ce.sdk("sk-ant-1", style.bearer, tap.option())
			ctx := context.Background()
			first, err := client.Messages.New(ctx, question("claude-test", "How do I reset my password?"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tap.get(HeaderCache), OutcomeMiss; got != want {
				t.Errorf("first %s = %q, want %q", HeaderCache, got, want)
			}
			again, err := client.Messages.New(ctx, question("claude-test", "How do I reset my password?"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tap.get(HeaderCache), OutcomeHitExact; got != want {
				t.Errorf("repeat %s = %q, want %q", HeaderCache, got, want)
			}
			if again.RawJSON() != first.RawJSON() {
				t.Errorf("exact hit = %s, want the original %s", again.RawJSON(), first.RawJSON())
			}
			ce.waitIndexed(1)
			para, err := client.Messages.New(ctx, question("claude-test", "How can I reset my password?"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tap.get(HeaderCache), OutcomeHitSemantic; got != want {
				t.Errorf("paraphrase %s = %q, want %q", HeaderCache, got, want)
			}
			if got, want := para.Content[0].Text, "answer to: How do I reset my password?"; got != want {
				t.Errorf("paraphrase answered %q, want %q", got, want)
			}
			// Another system prompt is another context: no semantic hit.
			p := question("claude-test", "How can I reset my password?")
			p.System = []anthropic.TextBlockParam{{Text: "Answer in French."}}
			if _, err := client.Messages.New(ctx, p); err != nil {
				t.Fatal(err)
			}
			if got, want := tap.get(HeaderCache), OutcomeMiss; got != want {
				t.Errorf("other system prompt %s = %q, want %q", HeaderCache, got, want)
			}
			if got, want := ce.a.messageCalls(), 2; got != want {
				t.Errorf("upstream calls = %d, want %d", got, want)
			}
			// The client's headers reached the upstream as sent.
			h := ce.a.requests()[0].header
			if style.bearer {
				if got := h.Get("Authorization"); got != "Bearer sk-ant-1" {
					t.Errorf("upstream Authorization = %q, want the client's", got)
				}
			} else if got := h.Get("X-Api-Key"); got != "sk-ant-1" || h.Get("Anthropic-Version") != "2023-06-01" {
				t.Errorf("upstream x-api-key = %q, anthropic-version = %q, want the client's", got, h.Get("Anthropic-Version"))
			}
			if h.Get("Anthropic-Version") == "" {
				t.Error("anthropic-version not forwarded")
			}
		})
	}
}

// accumulate reads a stream with the SDK's own accumulator.
func accumulate(t *testing.T, client anthropic.Client, p anthropic.MessageNewParams) (anthropic.Message, error) {
	t.Helper()
	stream := client.Messages.NewStreaming(context.Background(), p)
	defer stream.Close()
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	return acc, stream.Err()
}

// sameJSON compares two messages as JSON values.
func sameJSON(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("not JSON: %s", got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("not JSON: %s", want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("message = %s\nwant        %s", got, want)
	}
}

// A stored answer replayed as a stream reads, through the SDK's
// accumulator, as the message the upstream sent; a streamed miss is stored
// as the message it streamed. Text and tool use both.
func TestMessagesReplayEqualsOriginal(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{})
	var tap headerTap
	client := ce.sdk("sk-ant-1", true, tap.option())
	tool := anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}, "weather")
	for _, withTools := range []bool{false, true} {
		p := question("claude-test", fmt.Sprintf("Weather in Paris (tools %v)?", withTools))
		if withTools {
			p.Tools = []anthropic.ToolUnionParam{tool}
		}
		orig, err := client.Messages.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := accumulate(t, client, p)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tap.get(HeaderCache), OutcomeHitExact; got != want {
			t.Errorf("tools %v: stream %s = %q, want %q", withTools, HeaderCache, got, want)
		}
		sameJSON(t, acc.RawJSON(), orig.RawJSON())
		if withTools && (len(acc.Content) != 2 || acc.StopReason != anthropic.StopReasonToolUse) {
			t.Errorf("tool answer replayed as %s", acc.RawJSON())
		}
	}
	// Stream first: the assembled message is what a JSON repeat gets.
	p := question("claude-test", "Streamed first, then asked as JSON?")
	p.Tools = []anthropic.ToolUnionParam{tool}
	streamed, err := accumulate(t, client, p)
	if err != nil {
		t.Fatal(err)
	}
	var stored *anthropic.Message
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && tap.get(HeaderCache) != OutcomeHitExact {
		// no-store: a miss while the stream is being stored leaves no entry.
		if stored, err = client.Messages.New(context.Background(), p, option.WithHeader("Cache-Control", "no-store")); err != nil {
			t.Fatal(err)
		}
	}
	if tap.get(HeaderCache) != OutcomeHitExact {
		t.Fatal("a streamed miss was never served from the cache")
	}
	sameJSON(t, stored.RawJSON(), streamed.RawJSON())
}

// Every question's first attempt is answered 529 overloaded_error: the
// sidecar retries within its retry budget, falls back beyond it, and every
// client gets its answer.
func TestMessages529StormAbsorbed(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{caller: func(o *upstream.Options) {
		// This test is about the Messages path retrying 529; the breaker's
		// reading of a storm is the caller's own tests' business.
		o.Breaker = upstream.BreakerOptions{ConsecutiveFailures: -1, FailureRatio: -1}
	}})
	ce.a.overload = func(attempt int) bool { return attempt == 1 }
	client := ce.sdk("sk-ant-1", true)
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := fmt.Sprintf("Question number %d?", i)
			p := question("claude-test", q)
			// A system prompt of its own: the test's bag-of-words embedder
			// hashes words into 64 buckets, where two numbers may collide
			// and make two questions one for the semantic tier, which
			// would answer one with the other's answer once it is stored.
			p.System = []anthropic.TextBlockParam{{Text: fmt.Sprintf("Session %d.", i)}}
			if i%2 == 0 {
				acc, err := accumulate(t, client, p)
				if err == nil && (len(acc.Content) == 0 || acc.Content[0].Text != "answer to: "+q) {
					err = fmt.Errorf("stream %d answered %s", i, acc.RawJSON())
				}
				errs <- err
				return
			}
			m, err := client.Messages.New(context.Background(), p)
			if err == nil && m.Content[0].Text != "answer to: "+q {
				err = fmt.Errorf("request %d answered %q", i, m.Content[0].Text)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// Every question answered, none sent more than twice: retried on
	// claude-a within its retry budget (three, plus one per ten first
	// attempts), sent to claude-b, the fallback, beyond it (or when
	// claude-a's queue could not fit it). The first few questions may be
	// retried outside the budget: until more than upstream.ColdSlots are on
	// the lane it is lone, and retries as a client would.
	a, b := ce.a.messageCalls(), ce.b.messageCalls()
	if most := 24 + 3 + 24/10 + upstream.ColdSlots; a+b > 48 || a > most || b == 0 {
		t.Errorf("upstream saw %d requests at claude-a and %d at claude-b, want at most 48 in all, at most %d at claude-a (24, the retry budget and a lone lane's retries), some at claude-b",
			a, b, most)
	}
}

// The upstream's retry-after is waited out before the next attempt.
func TestMessagesRetryAfterObeyed(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{})
	ce.a.overload = func(attempt int) bool { return attempt == 1 }
	ce.a.retryAfter = "1"
	client := ce.sdk("sk-ant-1", false)
	if _, err := client.Messages.New(context.Background(), question("claude-test", "Slow down?")); err != nil {
		t.Fatal(err)
	}
	reqs := ce.a.requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 950*time.Millisecond {
		t.Errorf("retried after %s, want at least the 1s retry-after", gap)
	}
}

// When no target can answer, the client gets Anthropic's 529
// overloaded_error with a retry-after, never a hang or an OpenAI body.
func TestMessagesSaturatedAnswers529(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{proxy: func(o *Options) { o.StaleIfError = false }})
	ce.a.overload = func(int) bool { return true }
	ce.b.overload = func(int) bool { return true }
	ce.a.retryAfter, ce.b.retryAfter = "2", "2"
	var tap headerTap
	client := ce.sdk("sk-ant-1", true, tap.option())
	_, err := client.Messages.New(context.Background(), question("claude-test", "Anyone there?"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *anthropic.Error", err)
	}
	if apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" {
		t.Errorf("status %d type %q, want 529 overloaded_error (%s)", apiErr.StatusCode, apiErr.Type(), apiErr.RawJSON())
	}
	if tap.get("Retry-After") == "" {
		t.Error("no retry-after on the 529")
	}
}

// A stream cut by an error event after the 200 continues on the next target
// with the partial text as the assistant prefill; the client reads one
// clean answer, which is not cached.
func TestMessagesMidStreamErrorResumed(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{})
	ce.a.cutAfter = 3
	var tap headerTap
	client := ce.sdk("sk-ant-1", true, tap.option())
	q := "Tell me a long story about the sea"
	acc, err := accumulate(t, client, question("claude-test", q))
	if err != nil {
		t.Fatalf("resumed stream failed: %v", err)
	}
	if got, want := acc.Content[0].Text, "answer to: "+q; got != want || len(acc.Content) != 1 {
		t.Errorf("resumed answer %q (%d blocks), want %q", got, len(acc.Content), want)
	}
	if acc.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("stop_reason %q, want end_turn", acc.StopReason)
	}
	rb := ce.b.requests()
	if len(rb) != 1 {
		t.Fatalf("next target saw %d requests, want 1", len(rb))
	}
	msgs := rb[0].body["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "assistant" || last["content"] != "answer to: Tell" {
		t.Errorf("resume request ends with %v, want the partial answer (trailing space trimmed, as the API demands) as assistant prefill", last)
	}
	// Never cached: the repeat goes upstream again.
	if _, err := accumulate(t, client, question("claude-test", q)); err == nil && tap.get(HeaderCache) != OutcomeMiss {
		t.Errorf("repeat of a cut stream %s = %q, want a miss", HeaderCache, tap.get(HeaderCache))
	}
}

// A stream that cannot be resumed (thinking enabled: no prefill) ends with
// an error event the SDK raises, never a clean-looking stop.
func TestMessagesCutStreamEndsWithError(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{})
	ce.a.cutAfter = 2
	client := ce.sdk("sk-ant-1", true)
	p := question("claude-test", "Think about the tides")
	p.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
	_, err := accumulate(t, client, p)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.Type() != "overloaded_error" {
		t.Fatalf("stream err = %v, want the SDK's overloaded_error", err)
	}
	if n := len(ce.b.requests()); n != 0 {
		t.Errorf("next target saw %d requests, want none (no prefill with thinking)", n)
	}
}

// Two API keys never share an entry, whichever header carries them.
func TestMessagesKeysNeverShare(t *testing.T) {
	for _, style := range sdkStyles {
		t.Run(style.name, func(t *testing.T) {
			ce := newClaudeEnv(t, envOptions{threshold: 0.8})
			var tapA, tapB headerTap
			a := ce.sdk("sk-ant-tenant-a", style.bearer, tapA.option())
			b := ce.sdk("sk-ant-tenant-b", style.bearer, tapB.option())
			ctx := context.Background()
			if _, err := a.Messages.New(ctx, question("claude-test", "What is our secret plan?")); err != nil {
				t.Fatal(err)
			}
			ce.waitIndexed(1)
			for _, q := range []string{"What is our secret plan?", "What is the secret plan?"} {
				if _, err := b.Messages.New(ctx, question("claude-test", q)); err != nil {
					t.Fatal(err)
				}
				if got := tapB.get(HeaderCache); got != OutcomeMiss {
					t.Errorf("tenant b asking %q: %s = %q, want a miss", q, HeaderCache, got)
				}
			}
			if _, err := a.Messages.New(ctx, question("claude-test", "What is our secret plan?")); err != nil {
				t.Fatal(err)
			}
			if got := tapA.get(HeaderCache); got != OutcomeHitExact {
				t.Errorf("tenant a repeat %s = %q, want %q", HeaderCache, got, OutcomeHitExact)
			}
		})
	}
}

// Opus overloaded beyond its retries: the request is served by the smaller
// model, with "model" rewritten in the body.
func TestMessagesFallbackToSmallerModel(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{})
	ce.a.overload = func(int) bool { return true }
	var tap headerTap
	client := ce.sdk("sk-ant-1", true, tap.option())
	m, err := client.Messages.New(context.Background(), question("claude-opus", "Summarise the report"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(m.Model), "claude-sonnet"; got != want {
		t.Errorf("answered by %q, want %q", got, want)
	}
	if got, want := ce.b.requests()[0].body["model"], "claude-sonnet"; got != want {
		t.Errorf("fallback body model = %v, want %q", got, want)
	}
	if got := tap.get(HeaderUpstream); !strings.Contains(got, "claude-b") {
		t.Errorf("%s = %q, want the fallback target", HeaderUpstream, got)
	}
	// /stats shows the Claude model and both its targets, with the calls.
	var st Stats
	if err := json.Unmarshal(ce.get("/stats").body, &st); err != nil {
		t.Fatal(err)
	}
	sent := map[string]uint64{}
	for _, m := range st.Models {
		if m.Name == "claude-opus" {
			for _, tg := range m.Targets {
				sent[tg.Model] = tg.Sent
			}
		}
	}
	if sent["claude-opus"] == 0 || sent["claude-sonnet"] != 1 {
		t.Errorf("/stats claude-opus targets sent %v, want claude-opus tried and claude-sonnet once", sent)
	}
}

// count_tokens and other Anthropic paths pass through with their headers.
func TestMessagesPassThrough(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{})
	client := ce.sdk("sk-ant-1", false, option.WithHeader("Anthropic-Beta", "token-counting-2024-11-01"))
	n, err := client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    "claude-test",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != 12 {
		t.Errorf("input_tokens = %d, want 12", n.InputTokens)
	}
	r := ce.a.requests()[0]
	if r.path != "/v1/messages/count_tokens" || r.header.Get("X-Api-Key") != "sk-ant-1" ||
		r.header.Get("Anthropic-Version") != "2023-06-01" || r.header.Get("Anthropic-Beta") != "token-counting-2024-11-01" {
		t.Errorf("upstream got %s with headers %v, want the client's", r.path, r.header)
	}
}

// Errors of the sidecar itself come in Anthropic's shape.
func TestMessagesErrorShape(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{})
	r := ce.post("/v1/messages", `{"model":"claude-test","messages":[]}`, "X-Api-Key", "k", "Anthropic-Version", "2023-06-01")
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || r.status != 400 || body.Type != "error" ||
		body.Error.Type != "invalid_request_error" || body.Error.Message == "" {
		t.Errorf("status %d body %s, want 400 with an Anthropic invalid_request_error", r.status, r.body)
	}
}

// A Claude model no route lists goes to the Anthropic upstream, streamed or
// not, on a target of its own there; the default (OpenAI) upstream never
// sees it. Without AnthropicUpstream it would follow the default upstream.
func TestMessagesUnlistedModelGoesToAnthropicUpstream(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{proxy: func(o *Options) { homeUpstream(o, "anthropic", "claude-b", nil) }})
	client := ce.sdk("sk-ant-1", true)
	m, err := client.Messages.New(context.Background(), question("claude-unlisted", "Name a prime"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.Model); got != "claude-unlisted" {
		t.Errorf("answered by %q, want the model asked for", got)
	}
	if _, err := accumulate(t, client, question("claude-unlisted", "Name an even prime")); err != nil {
		t.Fatal(err)
	}
	if got := ce.b.messageCalls(); got != 2 {
		t.Errorf("Anthropic upstream got %d /v1/messages calls, want 2", got)
	}
	if got := ce.model.calls.Load(); got != 0 {
		t.Errorf("default upstream got %d calls, want none", got)
	}
	var st Stats
	if err := json.Unmarshal(ce.get("/stats").body, &st); err != nil {
		t.Fatal(err)
	}
	var sent uint64
	for _, ms := range st.Models {
		for _, tg := range ms.Targets {
			if tg.Name == "claude-b/claude-unlisted" {
				sent = tg.Sent
			}
		}
	}
	if sent != 2 {
		t.Errorf("/stats target claude-b/claude-unlisted sent %d, want 2", sent)
	}
}

// An Anthropic SDK's model list goes to the Anthropic upstream, as the SDK
// sent it, not to the OpenAI-shaped list of the routes that GET /v1/models
// answers other clients (wire.Route.Yield).
func TestModelsYieldToClaimant(t *testing.T) {
	ce := newClaudeEnv(t, envOptions{})
	client := ce.sdk("sk-ant-1", false)
	_, err := client.Models.List(context.Background(), anthropic.ModelListParams{})
	// The fake Claude has no model list: its own 404 comes back.
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.RawJSON(), "no /v1/models") {
		t.Fatalf("err = %v, want the Anthropic upstream's 404", err)
	}
	seen := false
	for _, r := range ce.a.requests() {
		seen = seen || (r.path == "/v1/models" && r.header.Get("X-Api-Key") == "sk-ant-1")
	}
	if !seen {
		t.Errorf("the Anthropic upstream saw %v, want GET /v1/models with the client's key", ce.a.requests())
	}
	if r := ce.get("/v1/models"); r.status != 200 || !strings.Contains(string(r.body), `"id":"gpt-test","object":"model"`) {
		t.Errorf("/v1/models without Anthropic headers = %d %s, want the routes' list", r.status, r.body)
	}
}
