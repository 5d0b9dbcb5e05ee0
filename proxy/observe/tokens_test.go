package observe

import (
	"fmt"
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/flow"

	"github.com/prometheus/client_golang/prometheus"
)

// TestTokenBookBounded: past its bounds, models and tenants are counted
// under "other", in /stats and in the metric.
func TestTokenBookBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := newTokenBook(nil, NewMetrics(reg))
	u := Usage{Input: 1, Output: 1, Known: true}
	for i := range maxTokenTenants + 10 {
		b.count(fmt.Sprint("model-", i), fmt.Sprint("tenant-", i), flow.OutcomeMiss, useSpent, u)
	}
	st := b.snapshot()
	if len(st.Models) != maxTokenModels+1 || len(st.Tenants) != maxTokenTenants+1 {
		t.Fatalf("%d models, %d tenants; want %d and %d", len(st.Models), len(st.Tenants), maxTokenModels+1, maxTokenTenants+1)
	}
	for _, m := range st.Models {
		if m.Name == tokenOther && m.Spent.Input != uint64(maxTokenTenants+10-maxTokenModels) {
			t.Errorf("other spent %d, want %d", m.Spent.Input, maxTokenTenants+10-maxTokenModels)
		}
	}
	if st.Spent.Input != uint64(maxTokenTenants+10) {
		t.Errorf("total spent %d, want %d", st.Spent.Input, maxTokenTenants+10)
	}
	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == "breakwater_tokens_total" && len(f.GetMetric()) > 2*(maxTokenModels+1) {
			t.Errorf("breakwater_tokens_total has %d series, want at most %d", len(f.GetMetric()), 2*(maxTokenModels+1))
		}
	}
}
