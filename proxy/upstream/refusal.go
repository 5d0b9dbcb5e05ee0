package upstream

import (
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// Cost is what a request costs a provider's token budgets before it is
// sent (lane.Cost): the input tokens its wire API estimates from the body,
// and the output the provider reserves for it.
type Cost = lane.Cost

// Limits a refusal can name (lane.Limit…): the keys of TargetStats.Refusals
// and the label of breakwater_upstream_refusals_total.
const (
	LimitRequests     = lane.LimitRequests
	LimitTokens       = lane.LimitTokens
	LimitInputTokens  = lane.LimitInputTokens
	LimitOutputTokens = lane.LimitOutputTokens
	LimitConcurrency  = lane.LimitConcurrency
)

// CodeRequestTooLarge is the code of a request whose cost exceeds a
// provider's token limit per minute: it can never be admitted.
const CodeRequestTooLarge = "request_too_large"

// refused counts a congestion refusal of t on the limit it hit.
func (t *target) refused(limit string) {
	for i, l := range lane.Limits {
		if l == limit {
			t.stats.refusals[i].Add(1)
			t.stats.recent.Add(t.c.now(), i)
		}
	}
	t.c.metrics.Refused(t.name, limit)
}
