package upstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// SameUpstream keeps a request on the upstream of its route's first target,
// even when a target of another upstream shares that priority: the other
// model there is tried, the other upstream never is, and the error says so.
// Without it the same request falls back to the other upstream.
func TestSameUpstreamSkipsOtherUpstreams(t *testing.T) {
	a := startUpstream(t, always(http.StatusServiceUnavailable))
	b := startUpstream(t, ok)
	c := newCaller(t, Options{
		Upstreams: []Upstream{{Name: "a", BaseURL: a.url()}, {Name: "b", BaseURL: b.url()}},
		Routes: []Route{{Name: "gpt-4o", Targets: []Target{
			{Upstream: "a", Model: "gpt-4o", Priority: 0},
			{Upstream: "b", Model: "gpt-4o", Priority: 0},
			{Upstream: "a", Model: "gpt-4o-mini", Priority: 1},
		}}},
	})
	for range 5 { // the weighted choice within priority 0 must never pick b
		req := chat("gpt-4o")
		req.SameUpstream = true
		_, err := c.Do(context.Background(), req)
		var ue *Error
		if !errors.As(err, &ue) || ue.Status != http.StatusServiceUnavailable || !strings.Contains(ue.Message, "bound to upstream a") {
			t.Fatalf("bound request with its upstream failing: %v, want a's 503 naming the binding", err)
		}
	}
	if n := b.count(); n != 0 {
		t.Fatalf("upstream b received %d bound requests, want 0", n)
	}
	mini := 0
	for _, s := range a.calls() {
		if strings.Contains(s.body, `"gpt-4o-mini"`) {
			mini++
		}
	}
	if mini == 0 {
		t.Error("the bound request did not fall back to the other model on its upstream")
	}
	if _, err := c.Do(context.Background(), chat("gpt-4o")); err != nil {
		t.Fatalf("unbound request: %v, want b's answer", err)
	}
	if n := b.count(); n != 1 {
		t.Errorf("upstream b received %d requests, want 1 (the unbound one)", n)
	}
}
