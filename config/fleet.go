package config

import (
	"fmt"
	"net/url"

	"github.com/breakwater-dev/breakwater/fleet"
)

// RedisURLEnv is the shared store's URL when the file names none: the
// short name beside the generic BREAKWATER_FLEET_REDIS_URL.
const RedisURLEnv = "BREAKWATER_REDIS_URL"

// FleetConfig is [fleet]: what replicas share.
type FleetConfig struct {
	// RedisURL is the shared store of the fleet's budgets
	// (redis://[user:password@]host:port/db, rediss:// for TLS). Default
	// "" (or BREAKWATER_REDIS_URL): none, budgets apply per replica.
	RedisURL string `toml:"redis_url"`
	// RedisTimeout bounds every Redis call; past it a request is decided
	// by this replica's share. Default 50ms.
	RedisTimeout Duration `toml:"redis_timeout"`
	// RedisPrefix starts every key written in Redis, so that fleets can
	// share one Redis. Default "breakwater".
	RedisPrefix string `toml:"redis_prefix"`
}

// BudgetConfig is one [[budgets]] entry (fleet.Budget).
type BudgetConfig struct {
	// Name labels the budget in headers, /stats and /metrics. Default
	// "budget<N>", by position.
	Name string `toml:"name"`
	// Tenant is the partition the budget applies to, as /stats names it,
	// "*" for each tenant separately, "" (default) for all tenants together.
	Tenant string `toml:"tenant"`
	// Class is the X-Breakwater-Class it applies to ("default" for requests
	// naming none), "*" for each class separately, "" (default) for all.
	Class string `toml:"class"`
	// RequestsPerMinute, TokensPerMinute, TokensPerDay: 0 (default) is no
	// limit; at least one must be set.
	RequestsPerMinute int64 `toml:"requests_per_minute"`
	TokensPerMinute   int64 `toml:"tokens_per_minute"`
	TokensPerDay      int64 `toml:"tokens_per_day"`
}

func defaultFleet() FleetConfig {
	return FleetConfig{RedisTimeout: Duration(fleet.DefaultTimeout), RedisPrefix: fleet.DefaultPrefix}
}

// applyRedisURLEnv reads RedisURLEnv when neither the file nor the generic
// override set the URL.
func (c *Config) applyRedisURLEnv(env func(string) string, fromEnv map[string]string) {
	if u := env(RedisURLEnv); u != "" && c.Fleet.RedisURL == "" {
		c.Fleet.RedisURL = u
		fromEnv["fleet.redis_url"] = RedisURLEnv
	}
}

// FleetBudgets are the [[budgets]] as the fleet package takes them.
func (c *Config) FleetBudgets() []fleet.Budget {
	var out []fleet.Budget
	for _, b := range c.Budgets {
		out = append(out, fleet.Budget{Name: b.Name, Tenant: b.Tenant, Class: b.Class,
			RequestsPerMinute: b.RequestsPerMinute, TokensPerMinute: b.TokensPerMinute, TokensPerDay: b.TokensPerDay})
	}
	return out
}

// BudgetScope says where budgets are kept, for -check and the start-up
// line: "" without budgets.
func (c *Config) BudgetScope() string {
	switch {
	case len(c.Budgets) == 0:
		return ""
	case c.Fleet.RedisURL == "":
		return fmt.Sprintf("%d budget(s) per replica: no [fleet] redis_url, so each replica admits the whole budget", len(c.Budgets))
	}
	return fmt.Sprintf("%d budget(s) shared by the fleet in Redis", len(c.Budgets))
}

func (c *Config) validateFleet(v *validator) {
	if u := c.Fleet.RedisURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "redis" && p.Scheme != "rediss" && p.Scheme != "unix") || (p.Host == "" && p.Scheme != "unix") {
			v.add("fleet.redis_url", u, `must be a redis:// or rediss:// URL, e.g. "redis://redis:6379/0"`)
		}
	}
	positive(v, "fleet.redis_timeout", c.Fleet.RedisTimeout)
	if c.Fleet.RedisPrefix == "" {
		v.add("fleet.redis_prefix", "", "must not be empty")
	}
	v.lib(c, fleet.ValidateBudgets(c.FleetBudgets()))
}
