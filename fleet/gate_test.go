package fleet

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/fleet/redistest"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// fullModel is a loopback model that takes capacity calls at once and
// refuses the next with 429 (retry-after-ms: 10), as a provider's
// concurrency limit does. It counts the calls in flight, and, at each
// call it takes, compares them with the leases the fleets hold in Redis
// (leases: a read of the gate's lease count, 0 before there is one).
type fullModel struct {
	url                     string
	capacity                int64
	inflight, most, refused atomic.Int64
	answered                atomic.Int64
	overLeases              atomic.Int64 // calls taken with more in flight than leases held
	leases                  func() int64
	answer                  atomic.Int64 // its time per answer, ns
}

func newFullModel(t *testing.T, capacity int64, answer time.Duration) *fullModel {
	t.Helper()
	m := &fullModel{capacity: capacity, leases: func() int64 { return 1 << 40 }}
	m.answer.Store(int64(answer))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := m.inflight.Add(1)
		defer m.inflight.Add(-1)
		if n > m.capacity {
			m.refused.Add(1)
			w.Header().Set("Retry-After-Ms", "10")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		for most := m.most.Load(); n > most && !m.most.CompareAndSwap(most, n); most = m.most.Load() {
		}
		if n > m.leases() {
			m.overLeases.Add(1)
		}
		time.Sleep(time.Duration(m.answer.Load())) // the model's time per answer, not a synchronisation
		m.answered.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[]}`))
	}))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	return m
}

// gatedFleet is a replica's fleet for the gate's tests: its Redis calls
// bounded by a second, so that a busy CI machine does not send an attempt
// past the gate (the bound itself is TestGateSlowRedisNeverDelays').
func gatedFleet(t *testing.T, url string) *Fleet {
	t.Helper()
	f, err := New(Options{StoreOptions: StoreOptions{RedisURL: url, Prefix: "t" + t.Name(), Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// leaseCount reads how many leases the fleet holds on its one gate.
func leaseCount(f *Fleet) int64 {
	f.gates.mu.Lock()
	var key string
	for _, g := range f.gates.targets {
		key = g.keys[1]
	}
	f.gates.mu.Unlock()
	if key == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return f.rdb.Load().ZCard(ctx, key).Val()
}

// load runs clients goroutines per replica, each asking until stop says
// so; it returns the answers per replica and counts failures.
func load(t *testing.T, cs []*upstream.Caller, clients int, stop func() bool) []int64 {
	t.Helper()
	per := make([]int64, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		for range clients {
			wg.Go(func() {
				for !stop() {
					resp, err := c.Do(context.Background(), &upstream.Request{Method: http.MethodPost, Path: "/chat/completions",
						Header: http.Header{}, Body: []byte(`{"model":"x"}`)})
					if err != nil || resp.Status != http.StatusOK {
						t.Errorf("replica %d: %v %+v", i, err, resp)
						return
					}
					atomic.AddInt64(&per[i], 1)
				}
			})
		}
	}
	wg.Wait()
	return per
}

// Three replicas, eight clients each, in front of a model that takes
// three calls at once: every call the model takes holds a lease in Redis
// (the gate, not the lanes, admits them), and the fleet finds the limit
// with a refusal or two where three lanes alone (four attempts each before
// their first answer) are refused at once by the dozen.
func TestGateHoldsTheFleetToTheModel(t *testing.T) {
	r := redistest.Start(t)
	m := newFullModel(t, 3, 20*time.Millisecond)
	fs := []*Fleet{gatedFleet(t, r.URL()), gatedFleet(t, r.URL()), gatedFleet(t, r.URL())}
	shared(t, fs...)
	m.leases = func() int64 { return leaseCount(fs[0]) }
	cs := []*upstream.Caller{replica(t, fs[0], m.url), replica(t, fs[1], m.url), replica(t, fs[2], m.url)}
	load(t, cs, 8, func() bool { return m.answered.Load() >= 150 })
	var grants, bypassed uint64
	for _, f := range fs {
		s := f.Stats()
		grants, bypassed = grants+s.Gate.Grants, bypassed+s.Gate.Bypassed
	}
	t.Logf("model: %d refused, most in flight %d; gate: %d granted", m.refused.Load(), m.most.Load(), grants)
	if n := m.overLeases.Load(); n > 0 {
		t.Errorf("%d calls reached the model with more in flight than the fleet held leases", n)
	}
	if n := m.refused.Load(); n > 6 {
		t.Errorf("the model refused %d calls (most in flight %d); want the fleet's limit found in a few", n, m.most.Load())
	}
	if grants < 150 || bypassed > 0 {
		t.Errorf("gate: %d leases granted, %d attempts bypassed; want every attempt through the gate", grants, bypassed)
	}
}

// Three replicas with the same load share the model evenly: a replica
// that frees a slot does not take it back while another waits holding
// fewer (lanes alone starved two replicas of six at one answer each).
func TestGateTurnsAreFair(t *testing.T) {
	r := redistest.Start(t)
	m := newFullModel(t, 2, 10*time.Millisecond)
	fs := []*Fleet{gatedFleet(t, r.URL()), gatedFleet(t, r.URL()), gatedFleet(t, r.URL())}
	shared(t, fs...)
	cs := []*upstream.Caller{replica(t, fs[0], m.url), replica(t, fs[1], m.url), replica(t, fs[2], m.url)}
	per := load(t, cs, 6, func() bool { return m.answered.Load() >= 300 })
	least, most := per[0], per[0]
	for _, n := range per {
		least, most = min(least, n), max(most, n)
	}
	t.Logf("answers per replica %v", per)
	if float64(least) < 0.75*float64(most) {
		t.Errorf("answers per replica %v: the fewest below 3/4 of the most", per)
	}
}

// Redis killed under load: every request is still answered, through the
// lanes alone, and the attempts that went without the gate are counted.
// The lanes find the model's limit again by its refusals, as lanes that
// never had a gate do, so a request gets the attempts that takes (with
// the default three, lanes without a gate in this test failed one to three
// requests a run).
func TestGateRedisDownMidRun(t *testing.T) {
	r := redistest.Start(t)
	m := newFullModel(t, 4, 5*time.Millisecond)
	fs := []*Fleet{gatedFleet(t, r.URL()), gatedFleet(t, r.URL())}
	shared(t, fs...)
	rp := upstream.RetryPolicy{MaxAttempts: 10}
	cs := []*upstream.Caller{replicaWith(t, fs[0], m.url, rp), replicaWith(t, fs[1], m.url, rp)}
	var once sync.Once
	load(t, cs, 4, func() bool {
		n := m.answered.Load()
		if n >= 40 {
			once.Do(r.Kill)
		}
		return n >= 120
	})
	var grants, bypassed uint64
	for _, f := range fs {
		s := f.Stats()
		grants, bypassed = grants+s.Gate.Grants, bypassed+s.Gate.Bypassed
	}
	if grants < 40 || bypassed == 0 {
		t.Errorf("gate: %d granted, %d bypassed; want leases before Redis went, attempts without the gate after", grants, bypassed)
	}
}

// Behind a second of Redis latency, no attempt waits for the gate past
// the fleet's timeout (100 ms here; less than two of them, allowing for a
// busy machine): it goes without a lease, counted, and the gate resumes
// when Redis is fast again.
func TestGateSlowRedisNeverDelays(t *testing.T) {
	r := redistest.Start(t)
	d := redistest.NewDelay(t, r.Addr)
	const bound = 100 * time.Millisecond
	f, err := New(Options{StoreOptions: StoreOptions{RedisURL: "redis://" + d.Addr, Prefix: "t" + t.Name(), Timeout: bound}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	shared(t, f)
	ctx := t.Context()
	far := time.Now().Add(time.Minute)
	leased := func() bool { // a lease came, and is given back
		release, err := f.Acquire(ctx, "m", 2, far)
		if err != nil {
			t.Fatal(err)
		}
		if release != nil {
			release(0, false)
		}
		return release != nil
	}
	waitFor(t, "a lease", leased)
	d.Set(time.Second)
	var worst time.Duration
	for range 10 {
		t0 := time.Now()
		release, err := f.Acquire(ctx, "m", 2, far)
		worst = max(worst, time.Since(t0))
		if err != nil || release != nil {
			t.Fatalf("Acquire behind a slow Redis: %v, lease %v; want none, at once", err, release != nil)
		}
	}
	if worst >= 2*bound {
		t.Errorf("an attempt waited %v for the gate behind a 1s Redis; bound %v", worst, bound)
	}
	if s := f.Stats(); s.Gate.Bypassed < 10 || s.Faults == 0 {
		t.Errorf("stats %+v: want the attempts counted as bypassed and the timeout as a fault", s)
	}
	d.Set(0)
	waitFor(t, "the gate resumes when Redis is fast again", leased)
}

// A request that waits for the gate while the fleet's limit is full
// leaves when an answer could no longer arrive before its deadline: 429
// with Retry-After (the lane's queue_timeout shed), counted, never sent.
func TestGateWaitEndsBeforeTheDeadline(t *testing.T) {
	r := redistest.Start(t)
	m := newFullModel(t, 8, 50*time.Millisecond)
	f := gatedFleet(t, r.URL())
	shared(t, f)
	c := replicaWith(t, f, m.url, upstream.RetryPolicy{Deadline: 400 * time.Millisecond})
	ask(t, c) // the lane learns its time per answer, the gate its target
	var name string
	f.gates.mu.Lock()
	for n := range f.gates.targets {
		name = n
	}
	f.gates.mu.Unlock()
	// The rest of the fleet holds every slot of the limit (ColdSlots).
	var held []func(lane.Outcome, bool)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		release, err := f.Acquire(ctx, name, 2, time.Now().Add(time.Minute))
		cancel()
		if err != nil || release == nil {
			break // full: the wait ran out
		}
		held = append(held, release)
	}
	defer func() {
		for _, release := range held {
			release(lane.Other, false)
		}
	}()
	timeouts := f.Stats().Gate.Timeouts
	calls := m.answered.Load()
	_, err := c.Do(context.Background(), &upstream.Request{Method: http.MethodPost, Path: "/chat/completions",
		Header: http.Header{}, Body: []byte(`{"model":"x"}`)})
	var ue *upstream.Error
	if !errors.As(err, &ue) || ue.Status != http.StatusTooManyRequests || ue.RetryAfter <= 0 {
		t.Fatalf("with the fleet's limit held: %v; want 429 with Retry-After", err)
	}
	if got := f.Stats().Gate.Timeouts; got != timeouts+1 || m.answered.Load() != calls || len(held) == 0 {
		t.Errorf("gate timeouts %d (were %d), model calls %d (were %d), %d leases held; want the wait counted and nothing sent",
			got, timeouts, m.answered.Load(), calls, len(held))
	}
}

// An attempt whose client went away keeps its lease until its answer
// would have come (the provider goes on generating it, as lane.Abandon
// holds the lane's slot): the next attempt is not sent into the model
// still busy with it.
func TestGateAbandonedAttemptHoldsItsLease(t *testing.T) {
	r := redistest.Start(t)
	m := newFullModel(t, 1, 1500*time.Millisecond)
	f := gatedFleet(t, r.URL())
	shared(t, f)
	c := replica(t, f, m.url)
	ask(t, c) // the gate learns that an answer may take 1.5 s
	f.gates.mu.Lock()
	var state string
	for _, g := range f.gates.targets {
		state = g.keys[0]
	}
	f.gates.mu.Unlock()
	// The limit the fleet would have learnt from this model: one, a
	// counted level (not probed beyond within the test).
	waitFor(t, "the first answer's lease comes back", func() bool { return leaseCount(f) == 0 })
	if err := f.rdb.Load().HSet(t.Context(), state, "limit", 1, "ss", 0, "level", 1, "counted", 1).Err(); err != nil {
		t.Fatal(err)
	}
	m.answer.Store(int64(500 * time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, &upstream.Request{Method: http.MethodPost, Path: "/chat/completions",
			Header: http.Header{}, Body: []byte(`{"model":"x"}`)})
		done <- err
	}()
	waitFor(t, "the attempt reaches the model", func() bool { return m.inflight.Load() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	ask(t, c)
	if n := m.refused.Load(); n != 0 {
		t.Errorf("the model refused %d calls: the next attempt went while it still generated the abandoned one", n)
	}
	waitFor(t, "every lease comes back", func() bool { return leaseCount(f) == 0 })
}

// A gated attempt's refusal teaches the gate, not the lane, so a lane
// under the gate never meets a cut: without a cap, each replica's lane
// grew to tens of slots in front of a model that takes four, and the
// moment Redis went every replica sent at that limit. Capped at its share
// of the gate's limit (Fleet.Share, whole slots), the replicas' lanes sum
// to the gate's limit plus less than one slot each, and when Redis is
// killed under load the model refuses a handful of calls while the lanes
// take over, not dozens.
func TestGatedLaneCappedAtItsShare(t *testing.T) {
	r := redistest.Start(t)
	const capacity, replicas = 4, 3
	m := newFullModel(t, capacity, 50*time.Millisecond)
	var fs []*Fleet
	var cs []*upstream.Caller
	for range replicas {
		f := gatedFleet(t, r.URL())
		fs = append(fs, f)
		cs = append(cs, replicaWith(t, f, m.url, upstream.RetryPolicy{MaxAttempts: 10}))
	}
	shared(t, fs...)
	var (
		once               sync.Once
		limits, shares     []float64
		gateLimit          float64
		refusedAtKill, end int64
	)
	load(t, cs, 8, func() bool {
		n := m.answered.Load()
		if n >= 200 {
			once.Do(func() {
				for i, c := range cs {
					ts := target(t, c)
					limits = append(limits, ts.Limit)
					shares = append(shares, fs[i].Share(ts.Name))
				}
				gateLimit = gateLimitOf(t, fs[0])
				refusedAtKill, end = m.refused.Load(), n+200
				r.Kill()
			})
		}
		return end > 0 && n >= end
	})
	after := m.refused.Load() - refusedAtKill
	t.Logf("gate limit %v; lanes' limits %v, shares %v; model refused %d before Redis was killed, %d in the 200 answers after",
		gateLimit, limits, shares, refusedAtKill, after)
	sum := 0.0
	for i, l := range limits {
		if shares[i] <= 0 || l > shares[i] {
			t.Errorf("replica %d: lane limit %v, share %v; want the lane capped at its share", i, l, shares[i])
		}
		sum += l
	}
	if most := math.Floor(gateLimit) + replicas; sum > most {
		t.Errorf("lanes' limits %v sum to %v; want at most the gate's limit plus one slot per replica, %v", limits, sum, most)
	}
	// Lanes that sum to the model's capacity plus less than a slot each
	// send that many too many before their first cuts, and a few more
	// while their limits settle: at most five refusals per replica (5 to
	// 14 in runs with the cap; 31 to 38 without it).
	if most := int64(5 * replicas); after > most {
		t.Errorf("the model refused %d calls once Redis was gone; want at most %d", after, most)
	}
}

// gateLimitOf reads the limit of the fleet's one gate in Redis.
func gateLimitOf(t *testing.T, f *Fleet) float64 {
	t.Helper()
	f.gates.mu.Lock()
	var key string
	for _, g := range f.gates.targets {
		key = g.keys[0]
	}
	f.gates.mu.Unlock()
	v, err := f.rdb.Load().HGet(t.Context(), key, "limit").Float64()
	if err != nil {
		t.Fatalf("the gate's limit: %v", err)
	}
	return v
}
