package upstream

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
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
	// A first answer ends the lane's cold start; then the lane is made a
	// crowd (more requests on it than a lone lane holds, see lane.lone, whose
	// burst would go past the limit) with every slot of its limit held.
	if err := <-send("first", false); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	defer release()                                                            // a failed check must not leave the server's handlers blocked
	slots := max(int(math.Ceil(statsOf(t, c, "gpt-4o", "a/*").Limit-1e-9)), 1) // as aimd.slots
	n := max(slots, ColdSlots+1)                                               // more than a lone lane holds (lane.loneMax)
	var all []chan error
	for range n {
		all = append(all, send("held", false))
	}
	waitUntil(t, func() bool { st := statsOf(t, c, "gpt-4o", "a/*"); return st.Inflight+st.Queued == n })
	queued := statsOf(t, c, "gpt-4o", "a/*").Queued
	all = append(all, send("full", false))
	waitUntil(t, func() bool { return statsOf(t, c, "gpt-4o", "a/*").Queued == queued+1 })
	all = append(all, send("short", true))
	waitUntil(t, func() bool { return statsOf(t, c, "gpt-4o", "a/*").Queued == queued+2 })
	tg := c.routes["gpt-4o"].groups[0][0].t
	l := tg.laneFor(laneKey(chat("gpt-4o").Header, tg.up.cfg))
	ranks := l.Ranks()
	// The short call came last; it must be first, ahead of every full one.
	if len(ranks) != queued+2 || slices.Min(ranks[1:]) <= ranks[0] {
		t.Errorf("lane queue ranks %v (the short call came last), want it first and alone in its rank", ranks)
	}
	release()
	for _, ch := range all {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}
