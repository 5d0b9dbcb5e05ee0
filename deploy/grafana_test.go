package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboardUsesDocumentedMetrics parses the Grafana dashboard and
// checks that every metric its queries use is one docs/REFERENCE.md documents, so
// a renamed metric cannot leave a silently empty panel.
func TestGrafanaDashboardUsesDocumentedMetrics(t *testing.T) {
	raw, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	readme, err := os.ReadFile("../docs/REFERENCE.md")
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`breakwater_[a-z_]+`)
	if len(d.Panels) < 10 {
		t.Fatalf("dashboard has %d panels, want the full set", len(d.Panels))
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
				if !strings.Contains(string(readme), "`"+base+"`") {
					t.Errorf("panel %q uses %s, which the metric table of docs/REFERENCE.md does not list", p.Title, base)
				}
			}
		}
	}
}
