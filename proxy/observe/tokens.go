package observe

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/breakwater-dev/breakwater/proxy/flow"
)

// Bounds of the token accounting: models and tenants beyond them are
// counted under tokenOther, so an upstream naming arbitrary models or a
// flood of tenants cannot grow the maps.
const (
	maxTokenModels  = 256
	maxTokenTenants = 1024
	tokenOther      = "other"
)

// Price is what a model's tokens cost, in USD per million.
type Price struct {
	Input, Output float64
}

// cost is the price of in and out tokens in USD.
func (p Price) cost(in, out uint64) float64 {
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6
}

// tokenCounts are the tokens one model or tenant saved and spent.
type tokenCounts struct {
	savedIn, savedOut, spentIn, spentOut atomic.Uint64
	// savedNano and spentNano are cost in 1e-9 USD, accumulated per
	// answer at the price of the model that produced it (a tenant's tokens
	// span models).
	savedNano, spentNano atomic.Uint64
	// judgeIn, judgeOut and judgeNano are what the auto judge's calls
	// spent on verifying semantic candidates.
	judgeIn, judgeOut, judgeNano atomic.Uint64
	priced                       atomic.Bool
}

// tokenBook counts tokens saved and spent by model and by tenant.
type tokenBook struct {
	prices  map[string]Price
	mu      sync.Mutex
	models  map[string]*tokenCounts
	tenants map[string]*tokenCounts
	metric  *prometheus.CounterVec // nil without metrics
	cost    *prometheus.CounterVec // nil without metrics
}

func newTokenBook(prices map[string]Price, m *Metrics) *tokenBook {
	b := &tokenBook{prices: prices, models: map[string]*tokenCounts{}, tenants: map[string]*tokenCounts{}}
	if m != nil {
		b.metric, b.cost = m.Tokens, m.Cost
	}
	return b
}

// slot returns the counters of name in set, made on first use; past limit
// new names share tokenOther.
func (b *tokenBook) slot(set map[string]*tokenCounts, name string, limit int) *tokenCounts {
	c, ok := set[name]
	if ok {
		return c
	}
	if len(set) >= limit {
		name = tokenOther
		if c, ok = set[name]; ok {
			return c
		}
	}
	c = &tokenCounts{}
	set[name] = c
	return c
}

// Kinds of token use: what a request paid for, what a hit saved, what the
// judge spent verifying a candidate (breakwater_cost_usd_total{kind}).
const (
	useSpent  = "spent"
	useSaved  = "saved"
	useVerify = "verification"
)

// count records the usage u of one answer from model, of kind use (useSpent,
// useSaved, useVerify). tenant is the partition ("" when the cache is off: no
// tenant is known). outcome labels the metric.
func (b *tokenBook) count(model, tenant, outcome, use string, u Usage) (nano uint64) {
	if !u.Known {
		return 0
	}
	price, priced := b.prices[model]
	if priced {
		nano = uint64(math.Round(price.cost(u.Input, u.Output) * 1e9))
	}
	b.mu.Lock()
	m := b.slot(b.models, model, maxTokenModels)
	label := model
	if m == b.models[tokenOther] {
		label = tokenOther
	}
	var t *tokenCounts
	if tenant != "" {
		t = b.slot(b.tenants, tenant, maxTokenTenants)
	}
	b.mu.Unlock()
	for _, c := range [2]*tokenCounts{m, t} {
		if c == nil {
			continue
		}
		switch use {
		case useSaved:
			c.savedIn.Add(u.Input)
			c.savedOut.Add(u.Output)
			c.savedNano.Add(nano)
		case useVerify:
			c.judgeIn.Add(u.Input)
			c.judgeOut.Add(u.Output)
			c.judgeNano.Add(nano)
		default:
			c.spentIn.Add(u.Input)
			c.spentOut.Add(u.Output)
			c.spentNano.Add(nano)
		}
		if priced {
			c.priced.Store(true)
		}
	}
	if b.metric != nil {
		b.metric.WithLabelValues(label, "input", outcome).Add(float64(u.Input))
		b.metric.WithLabelValues(label, "output", outcome).Add(float64(u.Output))
		b.addCost(use, nano)
	}
	return nano
}

// addCost adds nano (1e-9 USD) to breakwater_cost_usd_total{kind}.
func (b *tokenBook) addCost(kind string, nano uint64) {
	if b.cost != nil && nano > 0 {
		b.cost.WithLabelValues(kind).Add(float64(nano) / 1e9)
	}
}

// OutcomeJudge labels the tokens of the auto judge's calls in
// breakwater_tokens_total: spent on verifying semantic candidates.
const OutcomeJudge = "judge"

// TokenCount is a number of input and output tokens.
type TokenCount struct {
	Input  uint64 `json:"input"`
	Output uint64 `json:"output"`
}

// TokenStats are the tokens the cache kept from the models (saved: hits,
// stale answers and coalesced followers, each counting the usage of the
// answer it reused) and those misses spent, with their cost when prices
// are configured (never guessed: a model without a price has no cost).
type TokenStats struct {
	Saved TokenCount `json:"saved"`
	Spent TokenCount `json:"spent"`
	// Verification is what the auto judge's calls spent checking semantic
	// candidates; NetSaved is Saved less it (never below zero).
	Verification TokenCount `json:"verification"`
	NetSaved     TokenCount `json:"net_saved"`
	CostSavedUSD *float64   `json:"cost_saved_usd,omitempty"`
	CostSpentUSD *float64   `json:"cost_spent_usd,omitempty"`
	// CostVerificationUSD is the judge calls' cost; CostNetSavedUSD is
	// CostSavedUSD less it.
	CostVerificationUSD *float64     `json:"cost_verification_usd,omitempty"`
	CostNetSavedUSD     *float64     `json:"cost_net_saved_usd,omitempty"`
	Models              []TokenEntry `json:"models"`
	// Tenants are keyed by the tenant's partition (an HMAC of its
	// credential, never the credential itself).
	Tenants []TokenEntry `json:"tenants"`
}

// TokenEntry is one model's or one tenant's tokens.
type TokenEntry struct {
	Name                string     `json:"name"`
	Saved               TokenCount `json:"saved"`
	Spent               TokenCount `json:"spent"`
	Verification        TokenCount `json:"verification"`
	CostSavedUSD        *float64   `json:"cost_saved_usd,omitempty"`
	CostSpentUSD        *float64   `json:"cost_spent_usd,omitempty"`
	CostVerificationUSD *float64   `json:"cost_verification_usd,omitempty"`
}

func (b *tokenBook) snapshot() TokenStats {
	b.mu.Lock()
	models := make([]TokenEntry, 0, len(b.models))
	var total TokenStats
	var costSaved, costSpent, costJudge float64
	priced := false
	for name, c := range b.models {
		e := entryOf(name, c)
		// A model's cost is its tokens × its price, computed exactly here;
		// tenants add up per-answer costs.
		if p, ok := b.prices[name]; ok && name != tokenOther {
			s, sp, j := p.cost(e.Saved.Input, e.Saved.Output), p.cost(e.Spent.Input, e.Spent.Output), p.cost(e.Verification.Input, e.Verification.Output)
			e.CostSavedUSD, e.CostSpentUSD, e.CostVerificationUSD = &s, &sp, &j
			costSaved += s
			costSpent += sp
			costJudge += j
			priced = true
		} else if c.priced.Load() {
			e.costsOf(c)
			costSaved += *e.CostSavedUSD
			costSpent += *e.CostSpentUSD
			costJudge += *e.CostVerificationUSD
			priced = true
		}
		total.Saved.Input += e.Saved.Input
		total.Saved.Output += e.Saved.Output
		total.Spent.Input += e.Spent.Input
		total.Spent.Output += e.Spent.Output
		total.Verification.Input += e.Verification.Input
		total.Verification.Output += e.Verification.Output
		models = append(models, e)
	}
	tenants := make([]TokenEntry, 0, len(b.tenants))
	for name, c := range b.tenants {
		e := entryOf(name, c)
		if c.priced.Load() {
			e.costsOf(c)
		}
		tenants = append(tenants, e)
	}
	b.mu.Unlock()
	sort.Slice(models, func(i, j int) bool { return models[i].Name < models[j].Name })
	sort.Slice(tenants, func(i, j int) bool { return tenants[i].Name < tenants[j].Name })
	total.Models, total.Tenants = models, tenants
	total.NetSaved = TokenCount{Input: subFloor(total.Saved.Input, total.Verification.Input), Output: subFloor(total.Saved.Output, total.Verification.Output)}
	if priced {
		net := costSaved - costJudge
		total.CostSavedUSD, total.CostSpentUSD, total.CostVerificationUSD, total.CostNetSavedUSD = &costSaved, &costSpent, &costJudge, &net
	}
	return total
}

// costsOf sets e's costs from c's per-answer sums.
func (e *TokenEntry) costsOf(c *tokenCounts) {
	s, sp, j := float64(c.savedNano.Load())/1e9, float64(c.spentNano.Load())/1e9, float64(c.judgeNano.Load())/1e9
	e.CostSavedUSD, e.CostSpentUSD, e.CostVerificationUSD = &s, &sp, &j
}

// subFloor is a - b, or 0 when b is larger.
func subFloor(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

func entryOf(name string, c *tokenCounts) TokenEntry {
	return TokenEntry{
		Name:         name,
		Saved:        TokenCount{Input: c.savedIn.Load(), Output: c.savedOut.Load()},
		Spent:        TokenCount{Input: c.spentIn.Load(), Output: c.spentOut.Load()},
		Verification: TokenCount{Input: c.judgeIn.Load(), Output: c.judgeOut.Load()},
	}
}

// countTokens records the tokens of r's answer: saved for a hit, a stale
// answer or a coalesced follower, spent for the request that led the call.
func (o *Observer) countTokens(r *flow.Record) {
	if !r.Usage.Known {
		return
	}
	use, outcome := useSpent, r.Outcome
	switch {
	case r.Coalesced:
		use, outcome = useSaved, outcomeCoalesced
	case r.Saved():
		use = useSaved
	case !r.Called:
		return
	}
	nano := o.tokens.count(r.UsageModel, r.Partition, outcome, use, r.Usage)
	if use == useSaved {
		o.window.recordTokens(r.End, r.Usage, nano)
	}
}

// outcomeCoalesced labels the tokens of a coalesced follower in
// breakwater_tokens_total (its request outcome is the leader's: miss).
const outcomeCoalesced = "coalesced"

// modelLabel is model as a metric label: the models the book tracks, and
// tokenOther past its bound, so an upstream naming arbitrary models cannot
// grow the metrics.
func (b *tokenBook) modelLabel(model string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.models[model]; ok || len(b.models) < maxTokenModels {
		b.slot(b.models, model, maxTokenModels)
		return model
	}
	return tokenOther
}
