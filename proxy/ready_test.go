package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReadyzNamesFailingIndexWrites is finding 9 of the hardening audit: with
// the disk full, searches succeeded, every index write failed and /readyz
// still said "ready". Now it says "degraded", names index_writes and the
// cause, and recovers on its own once writes work again.
func TestReadyzNamesFailingIndexWrites(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.index.writesDown.Store(true)
	if r := e.post("/v1/chat/completions", chat("written while the disk is full")); r.status != http.StatusOK {
		t.Fatalf("miss with failing writes: status %d", r.status)
	}
	var body struct {
		Status   string            `json:"status"`
		Degraded map[string]string `json:"degraded"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.get("/readyz")
		if r.status != http.StatusOK {
			t.Fatalf("/readyz status %d, want 200 (degraded still serves)", r.status)
		}
		body.Degraded = nil
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Status == "degraded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %s with every index write failing, want degraded", r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cause := body.Degraded["index_writes"]; !strings.Contains(cause, "no space left on device") {
		t.Errorf("/readyz degraded = %v, want index_writes naming the cause", body.Degraded)
	}
	// Searches work meanwhile, and do not clear the write failure.
	if r := e.post("/v1/chat/completions", chat("written while the disk is full")); r.header.Get(HeaderCache) != OutcomeHitExact {
		t.Errorf("repeat = %q, want an exact hit", r.header.Get(HeaderCache))
	}
	if r := e.get("/readyz"); !strings.Contains(string(r.body), "index_writes") {
		t.Errorf("/readyz after a successful read = %s, want index_writes still degraded", r.body)
	}

	e.index.writesDown.Store(false)
	if r := e.get("/readyz"); !strings.Contains(string(r.body), `"ready"`) {
		t.Errorf("/readyz after writes recovered = %s, want ready", r.body)
	}
	e.waitIndexed(1)
}
