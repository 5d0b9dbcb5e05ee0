package proxy

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestCoalescedLeaderLeaving: when the first of two identical requests hangs
// up, the shared upstream call goes on for the second, which gets the answer;
// when every waiter has gone, the call is cancelled.
func TestCoalescedLeaderLeaving(t *testing.T) {
	e := newEnv(t, envOptions{})
	release := make(chan struct{})
	cancelled := make(chan struct{}, 1)
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		select {
		case <-release:
			return false
		case <-r.Context().Done():
			cancelled <- struct{}{}
			return true
		}
	}
	leaderCtx, cancelLeader := contextWithCancel(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		req, _ := http.NewRequestWithContext(leaderCtx, http.MethodPost, e.front.URL+"/v1/chat/completions", stringsReader(chat("shared slow question")))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitCalls(t, e, 1)
	follower := make(chan reply, 1)
	go func() { follower <- e.post("/v1/chat/completions", chat("shared slow question")) }()
	e.waitWaiters(2) // the follower joined the flight
	cancelLeader()
	wg.Wait()
	e.waitWaiters(1) // the leader has left it
	close(release)
	r := <-follower
	if got, want := r.status, 200; got != want {
		t.Fatalf("follower status %d, want %d: %s", got, want, r.body)
	}
	if got, want := e.model.calls.Load(), int64(1); got != want {
		t.Errorf("upstream calls = %d, want %d (the follower shares the leader's call)", got, want)
	}

	// Now a single waiter that hangs up: the upstream request is cancelled.
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		<-r.Context().Done()
		cancelled <- struct{}{}
		return true
	}
	ctx, cancel := contextWithCancel(t)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.front.URL+"/v1/chat/completions", stringsReader(chat("nobody waits for this")))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitCalls(t, e, 2)
	cancel()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request went on after its only client hung up")
	}
}

func waitCalls(t *testing.T, e *env, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.model.calls.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("upstream calls = %d, want %d", e.model.calls.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
