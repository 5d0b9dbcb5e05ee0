package textnorm

import "testing"

func TestSemantic(t *testing.T) {
	cases := []struct {
		in, want string
		whole    bool
	}{
		{"How do I reset my password?", "How do I reset my password?", true},
		{"  How do I\treset my\n\npassword?  ", "How do I reset my password?", true},
		// Decimal digits of every script become ASCII (issue 42, technique 1).
		{"visit٣ evil४ site３", "visit3 evil4 site3", true},
		{"١٢٣٤٥٦٧٨٩٠ ๑๒ ᠑᠒ 𝟗", "1234567890 12 12 9", true},
		// Confusable punctuation in a URL becomes ASCII.
		{"evil。com∕reset", "evil.com/reset", true},
		{"evil．com／reset：8080", "evil.com/reset:8080", true},
		{"a−b – c — d", "a-b - c - d", true},
		{"don’t “quote”", "don't \"quote\"", true},
		// NFKC: fullwidth, circled and mathematical letters.
		{"Ｖｉｓｉｔ ⓔⓥⓘⓛ 𝐬𝐢𝐭𝐞", "Visit evil site", true},
		// A few emoji are decoration and dropped.
		{"How do I reset my password? 🙏", "How do I reset my password?", true},
		{"reset🔑password 👍🏽 👨‍👩‍👧", "reset password", false}, // 1+1+3 emoji > MaxEmoji
		{"thanks 👍🏽!", "thanks !", true},
		// Invisible format characters are removed and reported.
		{"pass\u200bword", "password", false},
		{"reset\u202emy password", "resetmy password", false},
		{"hi\U000E0076\U000E0069\U000E0073\U000E0069\U000E0074", "hi", false},
		{"a\ufe01b", "ab", false},
		{"bad \xff byte", "bad \ufffd byte", false},
		{"best phone under ₹5000?", "best phone under Rs 5000?", true},
		// Other scripts are kept as written.
		{"密码 пароль", "密码 пароль", true},
		// Enclosed letters that NFKC does not fold stay for the encoder to judge.
		{"answer in 🇫🇷", "answer in 🇫🇷", true},
	}
	for _, c := range cases {
		got, whole := Semantic(c.in)
		if got != c.want || whole != c.whole {
			t.Errorf("Semantic(%q) = %q, %v; want %q, %v", c.in, got, whole, c.want, c.whole)
		}
		if again, _ := Semantic(got); again != got {
			t.Errorf("Semantic(%q) = %q, not idempotent (again %q)", c.in, got, again)
		}
	}
}

func BenchmarkSemantic(b *testing.B) {
	b.ReportAllocs()
	for _, s := range []string{"How do I reset my password?", "How do I reset my password? 🙏"} {
		b.Run("", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Semantic(s)
			}
		})
	}
}
