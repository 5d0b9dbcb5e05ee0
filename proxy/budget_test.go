package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// server.max_body_bytes_in_flight covers POST /v1/responses as it covers the
// other cached endpoints: with the budget held by a Chat request waiting on
// its upstream, a Responses request that does not fit is refused at once
// with 503 and Retry-After, and is served once the budget is free again.
func TestResponsesWithinTheBodyBudget(t *testing.T) {
	const budget = 64 << 10
	e := newEnv(t, envOptions{proxy: func(o *Options) { o.MaxBodyBytes = budget; o.MaxBodyBytesInFlight = budget }})
	f := newFakeResponses()
	f.install(e)
	responsesHandler := e.model.HandleFunc
	arrived, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before the upstream closes, which waits for its handlers
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if r.URL.Path == "/v1/chat/completions" && strings.HasPrefix(lastUser(body), "hold") {
			close(arrived)
			<-release
			return false
		}
		return responsesHandler(w, r, body)
	}
	held := make(chan int, 1)
	go func() {
		// 40 KiB of the 64 KiB budget, held until the upstream answers.
		body := chat("hold " + strings.Repeat("x", 40<<10))
		resp, err := http.Post(e.front.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			held <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	<-arrived

	c := openai.NewClient(option.WithBaseURL(e.front.URL+"/v1/"), option.WithAPIKey("sk-tenant-a"), option.WithMaxRetries(0))
	big := ask("Summarise: " + strings.Repeat("y", 30<<10)) // 30 KiB: does not fit beside the 40
	var raw *http.Response
	_, err := c.Responses.New(context.Background(), big, option.WithResponseInto(&raw))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a Responses request beyond the body budget: %v, want 503", err)
	}
	if raw == nil || raw.Header.Get("Retry-After") == "" {
		t.Errorf("the 503 carries no Retry-After")
	}
	if n := f.creates.Load(); n != 0 {
		t.Errorf("the upstream created %d responses while the budget was full, want 0", n)
	}

	free()
	if got := <-held; got != http.StatusOK {
		t.Fatalf("the request holding the budget: %d", got)
	}
	if _, err := c.Responses.New(context.Background(), big); err != nil {
		t.Fatalf("the same Responses request with the budget free: %v", err)
	}
	if n := f.creates.Load(); n != 1 {
		t.Errorf("the upstream created %d responses, want 1", n)
	}
}
