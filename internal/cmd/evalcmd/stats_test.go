package evalcmd

import (
	"math"
	"testing"
)

func TestWilson(t *testing.T) {
	tests := []struct {
		k, n             int
		value, low, high float64
	}{
		{0, 0, 0, 0, 1},
		{0, 10, 0, 0, 0.2775},
		{5, 10, 0.5, 0.2366, 0.7634},
		{10, 10, 1, 0.7225, 1},
		{90, 100, 0.9, 0.8256, 0.9448},
	}
	for _, tt := range tests {
		got := Wilson(tt.k, tt.n)
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"value", got.Value, tt.value}, {"low", got.Low, tt.low}, {"high", got.High, tt.high}} {
			if math.Abs(c.got-c.want) > 5e-4 {
				t.Errorf("Wilson(%d, %d) %s = %.4f, want %.4f", tt.k, tt.n, c.name, c.got, c.want)
			}
		}
	}
}

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		in      string
		want    []float64
		wantErr bool
	}{
		{"0.80:0.83:0.01", []float64{0.8, 0.81, 0.82, 0.83}, false},
		{"0.9:0.9:0.05", []float64{0.9}, false},
		{"0.90, 0.93,0.95", []float64{0.9, 0.93, 0.95}, false},
		{"0.95,0.90", nil, true},
		{"0.9:0.8:0.01", nil, true},
		{"0.8:0.9:0", nil, true},
		{"0.8:0.9", nil, true},
		{"1.2", nil, true},
		{"x", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseThresholds(tt.in)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("ParseThresholds(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("ParseThresholds(%q) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("ParseThresholds(%q)[%d] = %v, want %v", tt.in, i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestTableAndPick(t *testing.T) {
	out := []Outcome{
		{Score: 0.99, GuardOK: true, Duplicate: true},
		{Score: 0.95, GuardOK: false, Reason: "number", Duplicate: false},
		{Score: 0.92, GuardOK: true, Duplicate: true},
		{Score: 0.91, GuardOK: true, Duplicate: false},
		{Score: 0.50, GuardOK: true, Duplicate: true},
		{Score: 0.40, GuardOK: true, Duplicate: false},
	}
	rows := Table(out, []float64{0.90, 0.93}, false)
	if got, want := rows[0].Hits, 4; got != want {
		t.Errorf("hits at 0.90 = %d, want %d", got, want)
	}
	if got, want := rows[0].Precision.Value, 0.5; got != want {
		t.Errorf("precision at 0.90 = %v, want %v", got, want)
	}
	if got, want := rows[0].Recall.Value, 2.0/3; math.Abs(got-want) > 1e-12 {
		t.Errorf("recall at 0.90 = %v, want %v", got, want)
	}
	if got, want := rows[0].FalsePerNonDuplicate.Value, 2.0/3; math.Abs(got-want) > 1e-12 {
		t.Errorf("false per non-duplicate at 0.90 = %v, want %v", got, want)
	}
	g := Table(out, []float64{0.90, 0.93}, true)
	if got, want := g[0].Hits, 3; got != want {
		t.Errorf("guarded hits at 0.90 = %d, want %d", got, want)
	}
	if got, want := g[1].Hits, 1; got != want {
		t.Errorf("guarded hits at 0.93 = %d, want %d", got, want)
	}
	if got, want := g[1].FalseHitRate.Value, 0.0; got != want {
		t.Errorf("guarded false-hit rate at 0.93 = %v, want %v", got, want)
	}
	// Three hits (one wrong) or one clean hit bound the false-hit rate only
	// at about 0.79 (Wilson).
	if _, found := PickThreshold(g, 0.5); found {
		t.Errorf("PickThreshold(0.5) found a threshold from three hits")
	}
	if row, found := PickThreshold(g, 0.8); !found || row.Threshold != 0.90 {
		t.Errorf("PickThreshold(0.8) = %v, %v; want 0.90, true", row.Threshold, found)
	}
	// The lowest threshold that meets the target wins, not the first below it.
	manual := []Row{
		{Threshold: 0.90, Hits: 10, FalseHitRate: Interval{High: 0.30}},
		{Threshold: 0.91, Hits: 9, FalseHitRate: Interval{High: 0.06}},
		{Threshold: 0.92, Hits: 0, FalseHitRate: Interval{High: 1}},
		{Threshold: 0.93, Hits: 8, FalseHitRate: Interval{High: 0.04}},
		{Threshold: 0.94, Hits: 7, FalseHitRate: Interval{High: 0.03}},
	}
	if row, found := PickThreshold(manual, 0.05); !found || row.Threshold != 0.93 {
		t.Errorf("PickThreshold(manual, 0.05) = %v, %v; want 0.93, true", row.Threshold, found)
	}
	rej := RejectionsAt(out, 0.9, []string{"negation", "number"})
	if got, want := len(rej), 1; got != want {
		t.Fatalf("len(RejectionsAt) = %d, want %d", got, want)
	}
	if got, want := rej[0], (Rejections{Reason: "number", NonDuplicate: 1}); got != want {
		t.Errorf("RejectionsAt = %+v, want %+v", got, want)
	}
}
