package config

import (
	"fmt"

	"github.com/breakwater-dev/breakwater/fleet"
)

// RedisURLEnv is the shared store's URL when the file names none: the
// short name beside the generic BREAKWATER_FLEET_REDIS_URL.
const RedisURLEnv = "BREAKWATER_REDIS_URL"

// applyRedisURLEnv reads RedisURLEnv when neither the file nor the generic
// override set the URL.
func (c *Config) applyRedisURLEnv(env func(string) string, fromEnv map[string]string) {
	if u := env(RedisURLEnv); u != "" && c.Fleet.RedisURL == "" {
		c.Fleet.RedisURL = u
		fromEnv["fleet.redis_url"] = RedisURLEnv
	}
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
	v.lib(c, c.Fleet.Validate())
	v.lib(c, fleet.ValidateBudgets(c.Budgets))
}
