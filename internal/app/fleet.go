package app

import (
	"net/http"

	"github.com/breakwater-dev/breakwater/cache"
	bwfleet "github.com/breakwater-dev/breakwater/fleet"
	"github.com/breakwater-dev/breakwater/proxy"
)

// addFleet puts the [[budgets]] in front of the proxy's caller, shared in
// Redis when [fleet] redis_url is set. Neither: nothing changes.
func (a *App) addFleet(po *proxy.Options, p *cache.Partitioner) error {
	if len(a.cfg.Budgets) == 0 && a.cfg.Fleet.RedisURL == "" {
		return nil
	}
	f, err := bwfleet.New(bwfleet.Options{
		RedisURL: a.cfg.Fleet.RedisURL,
		Timeout:  a.cfg.Fleet.RedisTimeout.D(),
		Prefix:   a.cfg.Fleet.RedisPrefix,
		Budgets:  a.cfg.FleetBudgets(),
		Logger:   a.log,
	})
	if err != nil {
		return err
	}
	a.fleet = f
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
