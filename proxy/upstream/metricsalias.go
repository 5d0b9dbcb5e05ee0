package upstream

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/proxy/upstream/metrics"
)

// Metrics are the caller's Prometheus collectors (package metrics). A nil
// *Metrics records nothing.
type Metrics = metrics.Metrics

// NewMetrics builds the caller's collectors and registers them with reg
// (nil: not registered); see metrics.New.
func NewMetrics(reg prometheus.Registerer) *Metrics { return metrics.New(reg) }
