package upstream

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestShortGoesAheadInItsLane: with the lane's slots taken and a full
// request queued, a short call (the cache's judge) queued after it waits
// ahead of it in the lane, and both are sent once the slots free.
func TestShortGoesAheadInItsLane(t *testing.T) {
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Request-Id") == "held" {
			<-hold
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := newCaller(t, oneTarget(srv.URL+"/v1"))
	send := func(id string, short bool) chan error {
		done := make(chan error, 1)
		go func() {
			req := chat("gpt-4o")
			req.RequestID, req.Short = id, short
			_, err := c.Do(context.Background(), req)
			done <- err
		}()
		return done
	}
	// A first answer ends the lane's cold start; then every slot of its
	// limit is held.
	if err := <-send("first", false); err != nil {
		t.Fatal(err)
	}
	slots := max(int(math.Ceil(statsOf(t, c, "gpt-4o", "a/*").Limit-1e-9)), 1) // as aimd.slots
	var all []chan error
	for range slots {
		all = append(all, send("held", false))
	}
	waitUntil(t, func() bool { return statsOf(t, c, "gpt-4o", "a/*").Inflight == slots })
	all = append(all, send("full", false))
	waitUntil(t, func() bool { return statsOf(t, c, "gpt-4o", "a/*").Queued == 1 })
	all = append(all, send("short", true))
	waitUntil(t, func() bool { return statsOf(t, c, "gpt-4o", "a/*").Queued == 2 })
	tg := c.routes["gpt-4o"].groups[0][0].t
	l := tg.laneFor(laneKey(chat("gpt-4o").Header, tg.up.cfg))
	l.mu.Lock()
	var ranks []int
	for e := l.waiters.Front(); e != nil; e = e.Next() {
		ranks = append(ranks, e.Value.(*waiter).rank)
	}
	l.mu.Unlock()
	if len(ranks) != 2 || ranks[0] >= ranks[1] {
		t.Errorf("lane queue ranks %v (the short call came second), want it first", ranks)
	}
	close(hold)
	for _, ch := range all {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}
