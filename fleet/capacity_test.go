package fleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/fleet/redistest"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// replica is one sidecar's caller in front of a loopback model, as
// internal/app makes it: its common lane seeded by f, its attempts
// admitted by f's capacity gate, its learned limits published by f.
func replica(t *testing.T, f *Fleet, model string) *upstream.Caller {
	t.Helper()
	return replicaWith(t, f, model, upstream.RetryPolicy{})
}

// replicaWith is replica with the retry policy rp.
func replicaWith(t *testing.T, f *Fleet, model string, rp upstream.RetryPolicy) *upstream.Caller {
	t.Helper()
	return replicaOf(t, f, upstream.Upstream{Name: "m", BaseURL: model}, rp)
}

// replicaOf is replicaWith for the upstream up (named "m").
func replicaOf(t *testing.T, f *Fleet, up upstream.Upstream, rp upstream.RetryPolicy) *upstream.Caller {
	t.Helper()
	c, err := upstream.New(upstream.Options{
		Upstreams:       []upstream.Upstream{up},
		DefaultUpstream: "m",
		Retry:           rp,
		Seed:            f.Seed,
		Gate:            f,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Attach(c.Snapshot)
	return c
}

func ask(t *testing.T, c *upstream.Caller) {
	t.Helper()
	resp, err := c.Do(context.Background(), &upstream.Request{Method: http.MethodPost, Path: "/chat/completions", Header: http.Header{}, Body: []byte(`{"model":"x"}`)})
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("ask: %v %+v", err, resp)
	}
}

func target(t *testing.T, c *upstream.Caller) upstream.TargetStats {
	t.Helper()
	for _, m := range c.Snapshot() {
		for _, ts := range m.Targets {
			return ts
		}
	}
	t.Fatal("no target")
	return upstream.TargetStats{}
}

func loopbackModel(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A replica that joins a fleet starts its lane from the fleet's estimate:
// its first limit is the published limits' sum (the capacity gate divides
// it among the replicas), past slow start (which would stand at two after
// one answer), and it is counted; the one already there published what it
// learnt.
func TestJoiningReplicaStartsFromFleetEstimate(t *testing.T) {
	r := redistest.Start(t)
	model := loopbackModel(t)
	fa := newFleet(t, r.URL())
	a := replica(t, fa, model)
	for target(t, a).ServiceRate == 0 || target(t, a).Limit < 3 {
		ask(t, a) // slow start: one at a time, the limit goes 1, 2, 3
	}
	learnt := target(t, a).Limit
	name := target(t, a).Name
	waitFor(t, "replica A's estimate published", func() bool {
		st := fa.capacity.Load()
		return st != nil && st.targets[name].n == 1
	})

	fb := newFleet(t, r.URL())
	b := replica(t, fb, model)
	shared(t, fa, fb)
	waitFor(t, "replica B reads the fleet's estimate", func() bool {
		st := fb.capacity.Load()
		return st != nil && st.live == 2 && st.targets[name].n == 1
	})
	ask(t, b)
	got := target(t, b)
	if want := learnt; got.Limit != want {
		t.Fatalf("joining replica's limit %v after its first answer; want the fleet's %v (A's)", got.Limit, want)
	}
	if s := fb.Stats(); s.Seeded != 1 || s.OwnStarts != 0 {
		t.Fatalf("stats %+v: want one lane seeded", s)
	}
}

// With Redis down, a replica's lane starts on its own (slow start: two
// after one answer), and /stats counts it.
func TestRedisDownLaneStartsOnItsOwn(t *testing.T) {
	r := redistest.Start(t)
	url := r.URL()
	r.Kill()
	f := newFleet(t, url)
	c := replica(t, f, loopbackModel(t))
	ask(t, c)
	if got := target(t, c).Limit; got != 2 {
		t.Fatalf("limit %v after one answer with Redis down; want slow start's 2", got)
	}
	if s := f.Stats(); s.RedisUp || s.OwnStarts != 1 || s.Seeded != 0 {
		t.Fatalf("stats %+v: want Redis down and one lane started on its own", s)
	}
}

// A replica that joins a warm fleet starts every lane of a target from the
// fleet's estimate, not only the common one: its first request, of a class
// with a pool of its own and carrying the client's key (forwarded, so it
// takes a lane of its own, as the provider limits each key), starts past
// slow start at what the fleet learnt (a cold lane stands at two after one
// answer), and the gate of that lane, new in Redis, starts from the same
// estimate.
func TestJoiningReplicaSeedsEveryLane(t *testing.T) {
	r := redistest.Start(t)
	model := loopbackModel(t)
	fa := newFleet(t, r.URL())
	a := replica(t, fa, model)
	for target(t, a).ServiceRate == 0 || target(t, a).Limit < 3 {
		ask(t, a) // slow start on the common lane: 1, 2, 3
	}
	learnt, name := target(t, a).Limit, target(t, a).Name
	waitFor(t, "replica A's estimate published", func() bool {
		st := fa.capacity.Load()
		return st != nil && st.targets[name].n == 1
	})

	fb := newFleet(t, r.URL())
	b := replicaOf(t, fb, upstream.Upstream{Name: "m", BaseURL: model,
		Pools: map[string]upstream.PoolLimits{"batch": {MaxConcurrency: 2}}}, upstream.RetryPolicy{})
	shared(t, fa, fb)
	waitFor(t, "replica B reads the fleet's estimate", func() bool {
		st := fb.capacity.Load()
		return st != nil && st.live == 2 && st.targets[name].n == 1
	})
	resp, err := b.Do(context.Background(), &upstream.Request{Method: http.MethodPost, Path: "/chat/completions", Class: "batch",
		Header: http.Header{"Authorization": {"Bearer sk-app"}}, Body: []byte(`{"model":"x"}`)})
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("B's first request: %v %+v", err, resp)
	}
	if got := target(t, b).Limit; got != learnt {
		t.Errorf("joining replica's key lane at %v after its first answer; want the fleet's %v (A's)", got, learnt)
	}
	if s := fb.Stats(); s.Seeded != 1 || s.OwnStarts != 0 {
		t.Errorf("stats %+v: want B's one lane seeded", s)
	}
	fb.gates.mu.Lock()
	var gate *gateTarget
	for n, g := range fb.gates.targets {
		if strings.HasPrefix(n, name+"#") {
			gate = g
		}
	}
	fb.gates.mu.Unlock()
	if gate == nil {
		t.Fatal("no gate for B's key lane")
	}
	if got, err := fb.rdb.Load().HGet(t.Context(), gate.keys[0], "limit").Float64(); err != nil || got != learnt {
		t.Errorf("the key lane's gate starts at %v (%v); want the fleet's %v", got, err, learnt)
	}
}
