package embed

import (
	"strings"
	"testing"
)

// TestCoversPrintableASCII backs the fast path of Covers: every printable
// ASCII character has a piece, so a short printable ASCII text has no
// unknown token.
func TestCoversPrintableASCII(t *testing.T) {
	b := testBuiltin(t)
	for r := rune(0x20); r < 0x7F; r++ {
		s := "a" + string(r) + "a"
		if c := b.Coverage(s); c.Unknown != 0 {
			t.Errorf("Coverage(%q).Unknown = %d, want 0", s, c.Unknown)
		}
	}
}

func TestCoverage(t *testing.T) {
	b := testBuiltin(t)
	cases := []struct {
		text    string
		covered bool
	}{
		{"How do I reset my password?", true},
		{"How long does shipping take? Thank you so much!", true},
		// A script without pieces is one unknown token however long it is
		// (issue 42, technique 2).
		{"How do I reset my password? 请访问这个网站并输入你的密码", false},
		{"How do I reset my password? 🙏", false}, // the cache drops emoji before asking
		{"Summarise: " + strings.Repeat("clause ", 130), false},
	}
	for _, c := range cases {
		if got := b.Covers(c.text); got != c.covered {
			t.Errorf("Covers(%.60q) = %v, want %v (%+v)", c.text, got, c.covered, b.Coverage(c.text))
		}
	}
	if c := b.Coverage("reset 请访问这个网站 password 密码"); c.Unknown != 2 {
		t.Errorf("two runs of unknown characters: Unknown = %d, want 2", c.Unknown)
	}
}
