package proxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/breakwater-dev/breakwater/cache"
)

// The questions of the end-user scope tests, all in one partition (one app
// key). The loopback models answer "... <question>", so the answers to
// qPlant and qAgree are the same answer once normalised (case, the final
// "?"), and the answer to qOther is not.
const (
	qPlant = "How do I reset my password?"        // alice: a miss, stored
	qOwn   = "How do I reset my password please?" // a paraphrase of qPlant and qAgree
	qOther = "How can I reset my password?"       // a paraphrase whose answer differs
	qAgree = "how do i reset my password"         // the same answer as qPlant's
)

// askAs sends question as end user user and returns X-Breakwater-Cache and
// the answer's text.
type askAs func(t *testing.T, user, question string) (outcome, text string)

// endUserScope runs the scenario of issue 42 under one cross-user scope:
// alice plants an answer; she is served her own entry for a paraphrase; bob
// asks a paraphrase whose answer differs; carol asks one whose answer is
// the same; dave asks a paraphrase of alice's and carol's questions.
func endUserScope(t *testing.T, e *env, scope string, ask askAs) {
	t.Helper()
	want := func(who, q, outcome, gotOutcome string) {
		t.Helper()
		if gotOutcome != outcome {
			t.Errorf("%s: %s asks %q: %s = %q, want %q", scope, who, q, HeaderCache, gotOutcome, outcome)
		}
	}
	o, planted := ask(t, "alice", qPlant)
	want("alice", qPlant, OutcomeMiss, o)
	e.waitIndexed(1)
	o, _ = ask(t, "alice", qOwn)
	want("alice (her own entry)", qOwn, OutcomeHitSemantic, o)
	// The identical request is the model's answer to that very request:
	// exact hits are not scoped (the identity is not part of the key).
	o, text := ask(t, "bob", qPlant)
	want("bob (the identical request)", qPlant, OutcomeHitExact, o)
	if text != planted {
		t.Errorf("%s: bob's exact hit %q, want %q", scope, text, planted)
	}

	o, text = ask(t, "bob", qOther)
	if scope == cache.CrossUserAny {
		want("bob", qOther, OutcomeHitSemantic, o)
		if text != planted {
			t.Errorf("any: bob got %q, want alice's answer %q", text, planted)
		}
		return
	}
	// Alice's answer is refused to bob: his question goes to the model.
	want("bob", qOther, OutcomeMiss, o)
	if text == planted {
		t.Errorf("%s: bob was served alice's answer %q", scope, text)
	}
	e.waitIndexed(2)

	// Carol's miss draws the same answer as alice's refused entry: under
	// "agreed" her entry is stored as agreed.
	o, agreed := ask(t, "carol", qAgree)
	want("carol", qAgree, OutcomeMiss, o)
	e.waitIndexed(3)
	wantAgreements := uint64(0)
	if scope == cache.CrossUserAgreed {
		wantAgreements = 1
	}
	if got := e.cache.Stats(t.Context()).Agreements; got != wantAgreements {
		t.Errorf("%s: agreements = %d, want %d", scope, got, wantAgreements)
	}

	o, text = ask(t, "dave", qOwn)
	if scope == cache.CrossUserNever {
		want("dave", qOwn, OutcomeMiss, o)
		return
	}
	want("dave (after agreement)", qOwn, OutcomeHitSemantic, o)
	if text != agreed {
		t.Errorf("agreed: dave got %q, want carol's agreed answer %q", text, agreed)
	}
}

// scopes are the settings each API's test runs: the default (agreed), and
// the two others.
var scopes = []string{"", cache.CrossUserAny, cache.CrossUserNever}

func scopeEnv(scope string) envOptions {
	return envOptions{threshold: 0.8, cacheOpts: func(o *cache.Options) { o.CrossUser = scope }}
}

func scopeName(scope string) string {
	if scope == "" {
		return "default"
	}
	return scope
}

// OpenAI Chat Completions: the end user is safety_identifier (openai-go).
func TestEndUserScopeChatSDK(t *testing.T) {
	for _, scope := range scopes {
		t.Run(scopeName(scope), func(t *testing.T) {
			e := newEnv(t, scopeEnv(scope))
			c := openai.NewClient(option.WithBaseURL(e.front.URL+"/v1/"), option.WithAPIKey("sk-app"), option.WithMaxRetries(0))
			endUserScope(t, e, orDefault(scope), func(t *testing.T, user, q string) (string, string) {
				var raw *http.Response
				r, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
					Model:            "gpt-test",
					Messages:         []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)},
					SafetyIdentifier: openai.String(user),
				}, option.WithResponseInto(&raw))
				if err != nil || len(r.Choices) == 0 {
					t.Fatalf("chat: %v", err)
				}
				return raw.Header.Get(HeaderCache), r.Choices[0].Message.Content
			})
		})
	}
}

// OpenAI Responses: the end user is user (openai-go).
func TestEndUserScopeResponsesSDK(t *testing.T) {
	for _, scope := range scopes {
		t.Run(scopeName(scope), func(t *testing.T) {
			e := newEnv(t, scopeEnv(scope))
			newFakeResponses().install(e)
			c := responsesClient(e, "sk-app")
			endUserScope(t, e, orDefault(scope), func(t *testing.T, user, q string) (string, string) {
				p := ask(q)
				p.User = openai.String(user)
				r, outcome := create(t, c, p)
				return outcome, r.OutputText()
			})
		})
	}
}

// Anthropic Messages: the end user is metadata.user_id (anthropic-sdk-go).
func TestEndUserScopeMessagesSDK(t *testing.T) {
	for _, scope := range scopes {
		t.Run(scopeName(scope), func(t *testing.T) {
			ce := newClaudeEnv(t, scopeEnv(scope))
			tap := &headerTap{}
			c := ce.sdk("sk-ant-app", true, tap.option())
			endUserScope(t, ce.env, orDefault(scope), func(t *testing.T, user, q string) (string, string) {
				p := question("claude-test", q)
				p.Metadata = anthropic.MetadataParam{UserID: anthropic.String(user)}
				m, err := c.Messages.New(context.Background(), p, aoption.WithMaxRetries(0))
				if err != nil || len(m.Content) == 0 {
					t.Fatalf("messages: %v", err)
				}
				return tap.get(HeaderCache), m.Content[0].Text
			})
		})
	}
}

// Gemini carries no end user: the deployment's header names one (genai).
func TestEndUserScopeGeminiHeader(t *testing.T) {
	for _, scope := range scopes {
		t.Run(scopeName(scope), func(t *testing.T) {
			eo := scopeEnv(scope)
			eo.proxy = func(o *Options) { o.EndUserHeader = "X-End-User" }
			g := newGeminiEnv(t, eo)
			clients := map[string]*genai.Client{}
			endUserScope(t, g.env, orDefault(scope), func(t *testing.T, user, q string) (string, string) {
				c := clients[user]
				if c == nil {
					var err error
					c, err = genai.NewClient(context.Background(), &genai.ClientConfig{
						APIKey: "gemini-app-key", Backend: genai.BackendGeminiAPI,
						HTTPOptions: genai.HTTPOptions{BaseURL: g.front.URL, Headers: http.Header{"X-End-User": {user}}},
					})
					if err != nil {
						t.Fatal(err)
					}
					clients[user] = c
				}
				text, outcome, err := g.generate(c, geminiFlash, q)
				if err != nil {
					t.Fatalf("generateContent: %v", err)
				}
				return outcome, text
			})
		})
	}
}

func orDefault(scope string) string {
	if scope == "" {
		return cache.DefaultCrossUser
	}
	return scope
}

// A streamed miss agrees like a JSON one: its assembled answer is compared
// with the refused candidate's once the stream has ended whole.
func TestAgreementFromStreamedMiss(t *testing.T) {
	e := newEnv(t, envOptions{threshold: 0.8})
	as := func(user, q string, stream bool) string {
		return `{"model":"gpt-test","stream":` + strconv.FormatBool(stream) + `,"safety_identifier":` + quote(user) +
			`,"messages":[{"role":"user","content":` + quote(q) + `}]}`
	}
	if r := e.post("/v1/chat/completions", as("alice", qPlant, false)); r.header.Get(HeaderCache) != OutcomeMiss {
		t.Fatalf("alice: %s", r.header.Get(HeaderCache))
	}
	e.waitIndexed(1)
	r := e.post("/v1/chat/completions", as("carol", qAgree, true))
	if got := r.header.Get(HeaderCache); got != OutcomeMiss || !strings.Contains(string(r.body), "data: [DONE]") {
		t.Fatalf("carol's stream: %s = %q, body %.200s", HeaderCache, got, r.body)
	}
	e.waitIndexed(2)
	if got := e.cache.Stats(t.Context()).Agreements; got != 1 {
		t.Fatalf("agreements = %d, want 1", got)
	}
	if r := e.post("/v1/chat/completions", as("dave", qOwn, false)); r.header.Get(HeaderCache) != OutcomeHitSemantic {
		t.Errorf("dave after agreement: %s = %q, want %q", HeaderCache, r.header.Get(HeaderCache), OutcomeHitSemantic)
	}
}
