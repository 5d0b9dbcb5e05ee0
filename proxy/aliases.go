package proxy

import (
	"github.com/breakwater-dev/breakwater/proxy/flow"
	"github.com/breakwater-dev/breakwater/proxy/flow/owners"
	"github.com/breakwater-dev/breakwater/proxy/observe"
)

// The types and values of the flow (proxy/flow) and the observer
// (proxy/observe) that the proxy's Options and /stats name, under the
// names the proxy has always given them.
type (
	// Verify configures the live false-hit estimate (flow.Verify).
	Verify = flow.Verify
	// VerifyStats is the "verify" section of /stats.
	VerifyStats = flow.VerifyStats
	// OwnerStore keeps Responses ids' owners for every replica of a fleet.
	OwnerStore = owners.Store
	// Usage is the token counts of one answer (wire.Usage).
	Usage = flow.Usage
	// Format is one wire API's cached endpoint (wire.Format).
	Format = flow.Format
	// StreamAssembler follows one stream of a Format (wire.StreamAssembler).
	StreamAssembler = flow.StreamAssembler
	// Metrics are the proxy's Prometheus metrics (observe.Metrics).
	Metrics = observe.Metrics
	// Price is what a model's tokens cost, in USD per million.
	Price         = observe.Price
	TokenCount    = observe.TokenCount
	TokenStats    = observe.TokenStats
	TokenEntry    = observe.TokenEntry
	WindowStats   = observe.WindowStats
	TimelinePoint = observe.TimelinePoint
)

const (
	// OutcomeMissSampled marks a would-be semantic hit answered fresh to
	// measure the live false-hit rate (Options.Verify).
	OutcomeMissSampled = flow.OutcomeMissSampled
	// DefaultResponseOwners bounds the Responses ids remembered.
	DefaultResponseOwners = owners.DefaultResponseOwners
	// HeaderTokensSaved is what an answer served without spending tokens
	// saved.
	HeaderTokensSaved = flow.HeaderTokensSaved
)

// NewMetrics registers the proxy's metrics with reg (observe.NewMetrics).
var NewMetrics = observe.NewMetrics
