package upstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// BindUpstream keeps a request on the named upstream even when the route's
// first target is elsewhere and healthy; a route with no target there sends
// the request to that upstream with the requested model; the bound upstream
// failing is the answer, never another upstream's.
func TestBindUpstream(t *testing.T) {
	var failB atomic.Bool
	a := startUpstream(t, ok)
	b := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if failB.Load() {
			always(http.StatusServiceUnavailable)(w, r, n)
			return
		}
		ok(w, r, n)
	})
	c := newCaller(t, Options{
		Upstreams: []Upstream{{Name: "a", BaseURL: a.url()}, {Name: "b", BaseURL: b.url()}},
		Routes: []Route{
			{Name: "gpt-4o", Targets: []Target{{Upstream: "a", Model: "gpt-4o", Priority: 0}, {Upstream: "b", Model: "gpt-4o-b", Priority: 1}}},
			{Name: "only-a", Targets: []Target{{Upstream: "a", Model: "only-a"}}},
		},
		DefaultUpstream: "a",
	})
	do := func(model, bind string) (*Response, error) {
		req := chat(model)
		req.SameUpstream = true
		req.BindUpstream = bind
		return c.Do(context.Background(), req)
	}
	// The route's own target on b (another model name) is the one kept.
	resp, err := do("gpt-4o", "b")
	if err != nil || resp.Upstream != "b" {
		t.Fatalf("bound to b: %v, upstream %v", err, resp)
	}
	if got := b.calls()[0].body; !strings.Contains(got, `"gpt-4o-b"`) {
		t.Errorf("b received %s, want the route's model for b", got)
	}
	// No target of the route on b: b with the requested model.
	if resp, err = do("only-a", "b"); err != nil || resp.Upstream != "b" {
		t.Fatalf("bound to b, route without b: %v, upstream %v", err, resp)
	}
	if got := b.calls()[1].body; !strings.Contains(got, `"only-a"`) {
		t.Errorf("b received %s, want the requested model", got)
	}
	// A model no route lists, bound to b: b, not the default upstream.
	if resp, err = do("unlisted", "b"); err != nil || resp.Upstream != "b" {
		t.Fatalf("bound to b, unlisted model: %v, upstream %v", err, resp)
	}
	if n := a.count(); n != 0 {
		t.Fatalf("a received %d bound requests, want 0", n)
	}
	// b failing: its error, a never tried.
	failB.Store(true)
	_, err = do("gpt-4o", "b")
	var ue *Error
	if !errors.As(err, &ue) || ue.Status != http.StatusServiceUnavailable || !strings.Contains(ue.Message, "bound to upstream b") {
		t.Fatalf("bound to a failing b: %v, want b's 503 naming the binding", err)
	}
	if n := a.count(); n != 0 {
		t.Errorf("a received %d bound requests, want 0", n)
	}
	// An unknown name binds nothing beyond SameUpstream: the route's first
	// target's upstream.
	if resp, err = do("gpt-4o", "nope"); err != nil || resp.Upstream != "a" {
		t.Fatalf("bound to an unknown upstream: %v, upstream %v", err, resp)
	}
}

// Without a default upstream, a request bound to an upstream its route does
// not list still goes there.
func TestBindUpstreamNoDefault(t *testing.T) {
	a := startUpstream(t, ok)
	b := startUpstream(t, ok)
	c := newCaller(t, Options{
		Upstreams: []Upstream{{Name: "a", BaseURL: a.url()}, {Name: "b", BaseURL: b.url()}},
		Routes:    []Route{{Name: "gpt-4o", Targets: []Target{{Upstream: "a", Model: "gpt-4o"}}}},
	})
	req := chat("gpt-4o")
	req.BindUpstream = "b"
	resp, err := c.Do(context.Background(), req)
	if err != nil || resp.Upstream != "b" || b.count() != 1 || a.count() != 0 {
		t.Fatalf("bound to b without a default upstream: %v, %v; a %d b %d calls", err, resp, a.count(), b.count())
	}
}
