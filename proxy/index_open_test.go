package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

// readyzBody is /readyz's answer.
type readyzBody struct {
	Status   string            `json:"status"`
	Degraded map[string]string `json:"degraded"`
	Loading  []string          `json:"loading"`
}

func (e *env) readyz() readyzBody {
	e.t.Helper()
	r := e.get("/readyz")
	if r.status != http.StatusOK {
		e.t.Fatalf("/readyz status %d, want 200: %s", r.status, r.body)
	}
	var b readyzBody
	if err := json.Unmarshal(r.body, &b); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// TestServesWhileIndexOpens: the semantic tier's index opens in the
// background (a 1M-entry snapshot takes 11-15 s). Meanwhile the sidecar
// answers: a new question is forwarded, its repeat is an exact hit, a
// paraphrase is a miss; /readyz says degraded with the index loading, and
// /stats shows it opening. Once the test lets the open finish, /readyz is
// ready and paraphrases hit semantically.
func TestServesWhileIndexOpens(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var e *env
	e = newEnv(t, envOptions{threshold: 0.8, cacheOpts: func(co *cache.Options) {
		co.Index = nil
		co.OpenIndex = func(ctx context.Context) (cache.Index, error) {
			close(started)
			select {
			case <-release:
				return e.index, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}})
	<-started

	first := e.post("/v1/chat/completions", chat("How do I reset my password?"))
	if first.status != http.StatusOK || first.header.Get(HeaderCache) != OutcomeMiss {
		t.Fatalf("first question while opening: %d %q, want 200 miss (forwarded)", first.status, first.header.Get(HeaderCache))
	}
	if r := e.post("/v1/chat/completions", chat("How do I reset my password?")); r.header.Get(HeaderCache) != OutcomeHitExact {
		t.Errorf("repeat while opening = %q, want %q", r.header.Get(HeaderCache), OutcomeHitExact)
	}
	if r := e.post("/v1/chat/completions", chat("How can I reset my password?")); r.header.Get(HeaderCache) != OutcomeMiss {
		t.Errorf("paraphrase while opening = %q, want %q (no semantic tier yet)", r.header.Get(HeaderCache), OutcomeMiss)
	}
	if got := e.model.calls.Load(); got != 2 {
		t.Errorf("upstream calls while opening = %d, want 2 (question and paraphrase)", got)
	}
	rb := e.readyz()
	if rb.Status != "degraded" || !slices.Contains(rb.Loading, cache.ComponentIndex) || !strings.Contains(rb.Degraded[cache.ComponentIndex], "opening") {
		t.Errorf("/readyz while opening = %+v, want degraded with the index loading", rb)
	}
	var st Stats
	if err := json.Unmarshal(e.get("/stats").body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Cache == nil || st.Cache.IndexState != cache.IndexOpening || st.Cache.OpeningSkips != 2 {
		t.Errorf("/stats cache while opening = %+v, want index_state opening and 2 opening_skips", st.Cache)
	}

	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for rb = e.readyz(); rb.Status != "ready"; rb = e.readyz() {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %+v 10s after the open was released, want ready", rb)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := json.Unmarshal(e.get("/stats").body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Cache.IndexState != cache.IndexReady {
		t.Errorf("/stats index_state once open = %q, want %q", st.Cache.IndexState, cache.IndexReady)
	}
	e.post("/v1/chat/completions", chat("Where is the Eiffel Tower?"))
	e.waitIndexed(1)
	if r := e.post("/v1/chat/completions", chat("Where is the Eiffel Tower located?")); r.header.Get(HeaderCache) != OutcomeHitSemantic {
		t.Errorf("paraphrase once open = %q, want %q", r.header.Get(HeaderCache), OutcomeHitSemantic)
	}
}

// TestIndexOpenFailureDegrades: an index that cannot be opened leaves the
// semantic tier off with the cause in /readyz, not loading, and requests
// are still answered.
func TestIndexOpenFailureDegrades(t *testing.T) {
	e := newEnv(t, envOptions{cacheOpts: func(co *cache.Options) {
		co.Index = nil
		co.OpenIndex = func(context.Context) (cache.Index, error) {
			return nil, errTest("open store: store built by a different embedder")
		}
	}})
	deadline := time.Now().Add(10 * time.Second)
	rb := e.readyz()
	for ; len(rb.Loading) > 0 || rb.Degraded[cache.ComponentIndex] == ""; rb = e.readyz() {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %+v, want the failed open reported", rb)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rb.Status != "degraded" || !strings.Contains(rb.Degraded[cache.ComponentIndex], "different embedder") {
		t.Errorf("/readyz after a failed open = %+v, want degraded naming the cause", rb)
	}
	if r := e.post("/v1/chat/completions", chat("Still answered?")); r.status != http.StatusOK {
		t.Errorf("request with the index off: status %d, want 200", r.status)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }
