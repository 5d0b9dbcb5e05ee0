package fleet

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

type counters struct {
	admitted, refused []atomic.Uint64 // per budget
	names             []string
	faults            atomic.Uint64
	fallbacks         atomic.Uint64
	refunds           atomic.Uint64
	lostAdjustments   atomic.Uint64
	seeded, ownStarts atomic.Uint64
	// the capacity gate (gate.go)
	gateGrants, gateDenials, gateBypassed, gateTimeouts, gateLost atomic.Uint64
}

func (c *counters) init(bs []Budget) {
	c.admitted = make([]atomic.Uint64, len(bs))
	c.refused = make([]atomic.Uint64, len(bs))
	for _, b := range bs {
		c.names = append(c.names, b.Name)
	}
}

// Stats is the fleet's part of /stats.
type Stats struct {
	// Store is "redis" (budgets shared by the fleet) or "local" (per
	// replica: no redis_url).
	Store string `json:"store"`
	// RedisUp says whether Redis answered the last call; Replicas is the
	// live replicas at the last heartbeat (1 without Redis).
	RedisUp  bool  `json:"redis_up"`
	Replicas int64 `json:"replicas"`
	// Faults counts Redis calls that failed or ran past the timeout;
	// Fallbacks the reservations decided by this replica's share because
	// Redis was down; LostAdjustments the reconciliations or refunds that
	// could not reach Redis (their estimate stood).
	Faults          uint64 `json:"redis_faults"`
	Fallbacks       uint64 `json:"fallbacks"`
	Refunds         uint64 `json:"refunds"`
	LostAdjustments uint64 `json:"lost_adjustments"`
	// Seeded counts lanes that started from the fleet's capacity estimate;
	// OwnStarts those that started cold, on their own, with Redis
	// configured (down, or nothing to share: a lone replica).
	Seeded    uint64 `json:"lanes_seeded"`
	OwnStarts uint64 `json:"lanes_own_start"`
	// Gate is the capacity gate's counts (see Acquire).
	Gate GateStats `json:"gate"`
	// Budgets counts, per budget, the requests it admitted and refused.
	Budgets []BudgetStats `json:"budgets"`
}

// GateStats counts the capacity gate's work on this replica: the leases
// Redis granted, the calls it denied (the fleet's limit full, or another
// replica's turn: the attempt waits and asks again), the attempts that went
// without the gate (Redis down, or a call that failed or ran past the
// timeout: the lane alone decided), the waits that ran out before the
// deadline (shed with 429), and the releases that could not reach Redis
// (their lease expires there on its own).
type GateStats struct {
	Grants   uint64 `json:"grants"`
	Denials  uint64 `json:"denials"`
	Bypassed uint64 `json:"bypassed"`
	Timeouts uint64 `json:"timeouts"`
	Lost     uint64 `json:"lost_releases"`
}

// BudgetStats is one budget's counts.
type BudgetStats struct {
	Name     string `json:"name"`
	Admitted uint64 `json:"admitted"`
	Refused  uint64 `json:"refused"`
}

// Stats returns the counters now.
func (f *Fleet) Stats() Stats {
	s := Stats{Store: "local", Replicas: f.live.Load(), RedisUp: f.up.Load(),
		Faults: f.stats.faults.Load(), Fallbacks: f.stats.fallbacks.Load(),
		Refunds: f.stats.refunds.Load(), LostAdjustments: f.stats.lostAdjustments.Load(),
		Seeded: f.stats.seeded.Load(), OwnStarts: f.stats.ownStarts.Load(),
		Gate: GateStats{Grants: f.stats.gateGrants.Load(), Denials: f.stats.gateDenials.Load(), Bypassed: f.stats.gateBypassed.Load(),
			Timeouts: f.stats.gateTimeouts.Load(), Lost: f.stats.gateLost.Load()}}
	if f.ro != nil {
		s.Store = "redis"
	}
	for i, n := range f.stats.names {
		s.Budgets = append(s.Budgets, BudgetStats{Name: n, Admitted: f.stats.admitted[i].Load(), Refused: f.stats.refused[i].Load()})
	}
	return s
}

var (
	descAdmitted  = prometheus.NewDesc("breakwater_budget_admitted_total", "Requests a budget admitted upstream.", []string{"budget"}, nil)
	descRefused   = prometheus.NewDesc("breakwater_budget_refused_total", "Requests a budget refused with 429.", []string{"budget"}, nil)
	descFaults    = prometheus.NewDesc("breakwater_fleet_redis_faults_total", "Redis calls that failed or ran past the fleet timeout.", nil, nil)
	descFallbacks = prometheus.NewDesc("breakwater_fleet_fallbacks_total", "Budget reservations decided by this replica's share while Redis was down.", nil, nil)
	descLost      = prometheus.NewDesc("breakwater_fleet_lost_adjustments_total", "Budget reconciliations or refunds that could not reach Redis.", nil, nil)
	descUp        = prometheus.NewDesc("breakwater_fleet_redis_up", "1 when Redis answered the last call (budgets shared), else 0.", nil, nil)
	descSeeded    = prometheus.NewDesc("breakwater_fleet_lanes_seeded_total", "Lanes that started from the fleet's capacity estimate.", nil, nil)
	descOwnStarts = prometheus.NewDesc("breakwater_fleet_lanes_own_start_total", "Lanes that started cold on their own with Redis configured (down, or nothing shared).", nil, nil)
	descGate      = prometheus.NewDesc("breakwater_fleet_gate_total", "The capacity gate's work: leases granted, calls denied (the fleet's limit full), attempts bypassed (Redis down or slow: the lane alone), waits timed out, releases lost.", []string{"result"}, nil)
	descReplicas  = prometheus.NewDesc("breakwater_fleet_replicas", "Live replicas at the last heartbeat.", nil, nil)
)

// Describe implements prometheus.Collector.
func (f *Fleet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAdmitted, descRefused, descFaults, descFallbacks, descLost, descUp, descReplicas, descSeeded, descOwnStarts, descGate} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (f *Fleet) Collect(ch chan<- prometheus.Metric) {
	s := f.Stats()
	for _, b := range s.Budgets {
		ch <- prometheus.MustNewConstMetric(descAdmitted, prometheus.CounterValue, float64(b.Admitted), b.Name)
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(b.Refused), b.Name)
	}
	ch <- prometheus.MustNewConstMetric(descFaults, prometheus.CounterValue, float64(s.Faults))
	ch <- prometheus.MustNewConstMetric(descFallbacks, prometheus.CounterValue, float64(s.Fallbacks))
	ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(s.LostAdjustments))
	up := 0.0
	if s.RedisUp {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(descReplicas, prometheus.GaugeValue, float64(s.Replicas))
	ch <- prometheus.MustNewConstMetric(descSeeded, prometheus.CounterValue, float64(s.Seeded))
	ch <- prometheus.MustNewConstMetric(descOwnStarts, prometheus.CounterValue, float64(s.OwnStarts))
	for _, g := range []struct {
		result string
		n      uint64
	}{{"granted", s.Gate.Grants}, {"denied", s.Gate.Denials}, {"bypassed", s.Gate.Bypassed}, {"timed_out", s.Gate.Timeouts}, {"lost_release", s.Gate.Lost}} {
		ch <- prometheus.MustNewConstMetric(descGate, prometheus.CounterValue, float64(g.n), g.result)
	}
}
