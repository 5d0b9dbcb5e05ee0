package app

import (
	"context"
	"net/http"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	bwfleet "github.com/breakwater-dev/breakwater/fleet"
	"github.com/breakwater-dev/breakwater/proxy"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// seed is the upstream caller's Options.Seed when Redis is configured: the
// fleet's capacity estimate, read from the fleet made after the caller
// (addFleet), before the first request. nil without Redis: every lane
// starts on its own, as without a fleet.
func (a *App) seed() func(string) (float64, time.Duration) {
	if a.cfg.Fleet.RedisURL == "" {
		return nil
	}
	return func(target string) (float64, time.Duration) {
		if a.fleet == nil {
			return 0, 0
		}
		return a.fleet.Seed(target)
	}
}

// gate is the upstream caller's Options.Gate when Redis is configured: the
// fleet's capacity gate (fleet/gate.go), on the fleet made after the
// caller (addFleet). nil without Redis: the lanes alone, as without a
// fleet.
func (a *App) gate() upstream.Gate {
	if a.cfg.Fleet.RedisURL == "" {
		return nil
	}
	return appGate{a}
}

type appGate struct{ a *App }

func (g appGate) Acquire(ctx context.Context, target string, rank int, sendBy time.Time) (func(lane.Outcome, bool), error) {
	if g.a.fleet == nil {
		return nil, nil
	}
	return g.a.fleet.Acquire(ctx, target, rank, sendBy)
}

func (g appGate) Share(target string) float64 {
	if g.a.fleet == nil {
		return 0
	}
	return g.a.fleet.Share(target)
}

// addFleet puts the [[budgets]] in front of the proxy's caller, shared in
// Redis when [fleet] redis_url is set. Neither: nothing changes.
func (a *App) addFleet(po *proxy.Options, p *cache.Partitioner) error {
	if len(a.cfg.Budgets) == 0 && a.cfg.Fleet.RedisURL == "" {
		return nil
	}
	f, err := bwfleet.New(bwfleet.Options{
		StoreOptions: a.cfg.Fleet,
		Budgets:      a.cfg.Budgets,
		Logger:       a.log,
	})
	if err != nil {
		return err
	}
	a.fleet = f
	if s, ok := po.Caller.(interface{ Snapshot() []upstream.ModelStats }); ok {
		f.Attach(s.Snapshot) // its learned limits, published at every beat
	}
	a.closers = append(a.closers, f.Close)
	a.registry.MustRegister(f)
	// The tenant is the cache's partition: the one /stats and the
	// per-tenant metrics name (the cache off: one tenant, "shared").
	tenant := func(http.Header) string { return cache.SharedPartition }
	if p != nil {
		tenant = p.Partition
	}
	po.Caller = f.Wrap(po.Caller, tenant)
	po.FleetStats = func() any { return f.Stats() }
	return nil
}
