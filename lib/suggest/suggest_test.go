package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"demo", "demo", 0},
		{"dmeo", "demo", 1}, // an adjacent swap is one edit
		{"demo", "dem", 1},
		{"demo", "dema", 1},
		{"", "abc", 3},
		{"threshhold", "threshold", 1},
		{"kitten", "sitting", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"listen", "log_level", "log_format"}
	for _, c := range []struct{ name, want string }{
		{"lsiten", "listen"},
		{"log_levle", "log_level"},
		{"loglevel", "log_level"},
		{"shutdown", ""}, // nothing within two edits
	} {
		if got := Closest(c.name, names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
