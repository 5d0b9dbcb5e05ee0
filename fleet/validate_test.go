package fleet

import (
	"testing"
	"time"
)

// TestValidateBudgetsNamesTheKey: each invalid [[budgets]] entry is one
// problem naming its key, and New refuses the budgets.
func TestValidateBudgetsNamesTheKey(t *testing.T) {
	ok := Budget{Name: "team", RequestsPerMinute: 10}
	tests := []struct {
		budgets []Budget
		want    string
	}{
		{[]Budget{ok, {Name: "b", TokensPerDay: -1, TokensPerMinute: 5}}, `budgets[1] = "b": limits must be >= 0 (0: no limit)`},
		{[]Budget{{Name: "none"}}, `budgets[0] = "none": set requests_per_minute, tokens_per_minute or tokens_per_day`},
		{[]Budget{ok, ok}, `budgets[1].name = "team": another budget has this name`},
		{[]Budget{{Name: "a b", RequestsPerMinute: 1}}, `budgets[0].name = "a b": no spaces or colons`},
		{[]Budget{{Class: "a-class-name-much-longer-than-a-pool-name", RequestsPerMinute: 1}}, `budgets[0].class = "a-class-name-much-longer-than-a-pool-name": must be a short pool name such as realtime or batch, or "*"`},
	}
	for _, tt := range tests {
		if err := ValidateBudgets(tt.budgets); err == nil || err.Error() != tt.want {
			t.Errorf("ValidateBudgets() = %v, want %q", err, tt.want)
		}
		if f, err := New(Options{Budgets: tt.budgets}); err == nil {
			f.Close()
			t.Errorf("New accepted %+v", tt.budgets)
		}
	}
	if err := ValidateBudgets([]Budget{ok, {TokensPerMinute: 1, Class: Any}}); err != nil {
		t.Errorf("ValidateBudgets() of valid budgets = %v, want nil", err)
	}
}

// TestStoreOptionsValidateNamesTheKey: each invalid [fleet] key is one
// problem naming it, New refuses it, and New's zero values (its defaults)
// are valid.
func TestStoreOptionsValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		opts StoreOptions
		want string
	}{
		{StoreOptions{RedisURL: "http://redis:6379"}, `fleet.redis_url = "http://redis:6379": must be a redis:// or rediss:// URL, e.g. "redis://redis:6379/0"`},
		{StoreOptions{RedisURL: "redis://"}, `fleet.redis_url = "redis://": must be a redis:// or rediss:// URL, e.g. "redis://redis:6379/0"`},
		{StoreOptions{Timeout: -time.Millisecond}, `fleet.redis_timeout = -1ms: must be > 0`},
	}
	for _, tt := range tests {
		o := tt.opts
		o.Prefix = DefaultPrefix
		if err := o.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
		if f, err := New(Options{StoreOptions: tt.opts}); err == nil {
			f.Close()
			t.Errorf("New accepted %+v", tt.opts)
		}
	}
	if err := (StoreOptions{Timeout: DefaultTimeout}).Validate(); err == nil || err.Error() != `fleet.redis_prefix is empty: must not be empty` {
		t.Errorf("Validate() of an empty prefix = %v, want the key named", err)
	}
	if err := DefaultStoreOptions().Validate(); err != nil {
		t.Errorf("DefaultStoreOptions().Validate() = %v, want nil", err)
	}
	f, err := New(Options{})
	if err != nil {
		t.Fatalf("New(Options{}) = %v, want the defaults", err)
	}
	f.Close()
	if f.opts.Timeout != DefaultTimeout || f.opts.Prefix != DefaultPrefix {
		t.Errorf("New(Options{}) has timeout %v and prefix %q, want %v and %q", f.opts.Timeout, f.opts.Prefix, DefaultTimeout, DefaultPrefix)
	}
}
