package upstream

import reports "github.com/breakwater-dev/breakwater/proxy/upstream/report"

// The caller's reports (package report): each target's state and counters,
// each routed model's targets, and what one call did at its targets.
type (
	TargetStats = reports.TargetStats
	ModelStats  = reports.ModelStats
	Step        = reports.Step
	Tried       = reports.Tried
)

// RefusalRateSpan is the span TargetStats.RefusalRate is measured over
// (report.RefusalRateSpan).
const RefusalRateSpan = reports.RefusalRateSpan
