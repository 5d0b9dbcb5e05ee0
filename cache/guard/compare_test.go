package guard

import "testing"

// TestComparisonsReject is finding 8 of the hardening audit: "Is x > 5 true
// when x is 3?" was served the answer to "Is x < 5 …" at similarity 0.988.
// Every pair here differs only in a comparison, and the answers differ.
func TestComparisonsReject(t *testing.T) {
	tests := []struct{ name, query, candidate string }{
		{"audit: > vs <", "Is x > 5 true when x is 3?", "Is x < 5 true when x is 3?"},
		{">= vs >", "Is x >= 5 true when x is 5?", "Is x > 5 true when x is 5?"},
		{"≥ vs ≤", "Is x ≥ 5 when x is 7?", "Is x ≤ 5 when x is 7?"},
		{"== vs !=", "Does a == b hold for NaN?", "Does a != b hold for NaN?"},
		{"operator vs none", "Is x > 5 true when x is 3?", "Is x 5 true when x is 3?"},
		{"at least vs at most", "Do I need at least 3 years of experience?", "Do I need at most 3 years of experience?"},
		{"more than vs at least", "Can a team have more than 11 players?", "Can a team have at least 11 players?"},
		{"no more than vs more than", "Is it legal to drive no more than 80 km/h here?", "Is it legal to drive more than 80 km/h here?"},
		{"greater than vs fewer than", "Which countries have greater than 100 million people?", "Which countries have fewer than 100 million people?"},
		{"above vs below", "Which phones cost above 20000 rupees?", "Which phones cost below 20000 rupees?"},
		{"over N vs under N", "Best laptops over $1000?", "Best laptops under $1000?"},
		{"exceeds vs none", "What happens when the load exceeds 90 percent?", "What happens when the load is 90 percent?"},
		{"N or more vs N or less", "Is a score of 700 or more good for the GMAT?", "Is a score of 700 or less good for the GMAT?"},
		{"up to vs more than", "Can I carry up to 7 kg of hand luggage?", "Can I carry more than 7 kg of hand luggage?"},
		{"before vs after", "Should I eat before a workout?", "Should I eat after a workout?"},
		{"earlier than vs later than", "Can I check in earlier than noon?", "Can I check in later than noon?"},
		{"prior to vs after", "What should I do prior to the interview?", "What should I do after the interview?"},
		{"greater than or equal vs greater than", "Is 5 greater than or equal to 5?", "Is 5 greater than 5?"},
	}
	g := New(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, pair := range [][2]string{{tt.query, tt.candidate}, {tt.candidate, tt.query}} {
				if ok, reason := g.Check(pair[0], pair[1]); ok {
					t.Errorf("Check(%q, %q) = true; want a rejection", pair[0], pair[1])
				} else if reason != ReasonComparison && reason != ReasonOpposite && reason != ReasonNegation {
					t.Errorf("Check(%q, %q) rejected for %q; want %q", pair[0], pair[1], reason, ReasonComparison)
				}
			}
		})
	}
	// The audit's pair must be rejected by this rule and no other: with it
	// off, the pair passes.
	q, c := "Is x > 5 true when x is 3?", "Is x < 5 true when x is 3?"
	if ok, reason := g.Check(q, c); ok || reason != ReasonComparison {
		t.Errorf("audit pair: ok %v reason %q, want false %q", ok, reason, ReasonComparison)
	}
	if ok, reason := New(Options{NoComparisons: true}).Check(q, c); !ok {
		t.Errorf("audit pair with NoComparisons rejected for %q; the rule is what rejects it", reason)
	}
}

// TestComparisonsAccept: the same comparison written two ways, and words
// that only look like comparisons, pass.
func TestComparisonsAccept(t *testing.T) {
	tests := []struct{ name, query, candidate string }{
		{"> and more than", "Is x > 5 when x is 7?", "Is x more than 5 when x is 7?"},
		{"≥ and at least", "Is x ≥ 5 when x is 7?", "Is x at least 5 when x is 7?"},
		{">= and ≥", "Is x >= 5 when x is 7?", "Is x ≥ 5 when x is 7?"},
		{"<= and at most", "Is x <= 5 when x is 3?", "Is x at most 5 when x is 3?"},
		{"below and less than", "Which phones cost below 20000 rupees?", "Which phones cost less than 20000 rupees?"},
		{"under N and below N", "Best laptops under $1000?", "Best laptops below $1000?"},
		{"under without a number", "What is under the hood of a Tesla?", "What is under the hood of a Tesla car?"},
		{"arrow", "What does x -> y mean in Haskell?", "What does x -> y mean in Haskell code?"},
		{"channel arrow", "What does <-ch do in Go?", "What does <-ch do in Go code?"},
	}
	g := New(Options{NoContent: true})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ok, reason := g.Check(tt.query, tt.candidate); !ok {
				t.Errorf("Check(%q, %q) = false, %q; want true", tt.query, tt.candidate, reason)
			}
		})
	}
}
