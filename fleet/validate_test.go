package fleet

import "testing"

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
