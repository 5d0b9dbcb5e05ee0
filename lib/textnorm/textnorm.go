// Package textnorm folds a query into the one spelling the semantic tier embeds, keys and guards.
//
// Many code points look or read the same to a person and to a language model
// but differ to a tokenizer and to word rules: an Arabic-Indic "٣" is a 3, a
// fullwidth "．" or an ideographic "。" is a full stop in a URL, a division
// slash "∕" is a slash. Left as they are, they let a prompt carry words that
// no guard rule sees (issue 42: a non-ASCII digit glued to each word of a
// payload hid it from every rule). Semantic maps them all to one form, and
// removes, but reports, what a model may read and the semantic tier cannot
// see: invisible format characters (zero-width, bidi controls, the tag
// characters of "ASCII smuggling", variation selectors outside emoji) and
// emoji beyond a small number.
package textnorm

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxEmoji is how many emoji Semantic drops from a text and still reports it
// whole. A trailing 🙏 or 😊 is decoration; a run of pictographs can be a
// message of its own (a rebus, flags for a language) that the encoder would
// not see, so a text with more gets exact hits only.
const MaxEmoji = 3

// Semantic returns s in the form the semantic tier embeds and guards, and
// whole = false when something a model may read was removed (the text must
// then get exact hits only). In order:
//
//   - invalid UTF-8 is replaced (and reported: not whole);
//   - NFKC (Unicode UAX #15): fullwidth forms, ligatures, circled and
//     mathematical letters and digits, superscripts take their plain form;
//   - every decimal digit (general category Nd, any script) becomes its ASCII
//     digit;
//   - punctuation that stands for a dot, slash, backslash, colon, dash or
//     quote becomes the ASCII character (see confusable);
//   - the rupee sign, which the built-in encoder has no piece for, is
//     written "Rs";
//   - white space and control characters become one space; the text is
//     trimmed;
//   - emoji (pictographs, their skin tones, ZWJ and U+FE0F) are dropped,
//     up to MaxEmoji of them;
//   - other format characters (category Cf: zero-width spaces and joiners,
//     bidi controls, soft hyphens, tag characters) and variation selectors
//     are dropped and reported.
//
// Case is kept (the guard reads capitals as names) and letters of every
// script are kept as they are. Semantic is idempotent: Semantic(Semantic(s))
// returns the same text.
func Semantic(s string) (text string, whole bool) {
	if plain(s) {
		return s, true
	}
	whole = true
	if !utf8.ValidString(s) {
		s, whole = strings.ToValidUTF8(s, "\uFFFD"), false
	}
	s = norm.NFKC.String(s)
	var b strings.Builder
	b.Grow(len(s))
	emoji, dropped := 0, false
	inEmoji, space := false, false
	for _, r := range s {
		switch {
		case r == zwj && inEmoji, (r == 0xFE0F || r == 0xFE0E) && inEmoji, isSkinTone(r) && inEmoji:
			continue // part of the emoji just dropped
		case isEmoji(r):
			emoji++
			inEmoji, space, dropped = true, true, true
			continue
		}
		inEmoji = false
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			space = true
			continue
		case unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r):
			whole, dropped = false, true
			continue
		case unicode.Is(unicode.Nd, r):
			r = '0' + digitValue(r)
		case r == '₹':
			// The rupee sign has no piece in the built-in encoder's
			// vocabulary; "Rs" is how it is also written (and the guard
			// reads both as INR).
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("Rs")
			space = true
			continue
		default:
			if c, ok := confusable(r); ok {
				r = c
			}
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	if emoji > MaxEmoji {
		whole = false
	}
	out := b.String()
	if dropped {
		// A removed character may leave a letter next to a combining mark
		// that NFKC composes.
		out = norm.NFKC.String(out)
	}
	return out, whole
}

// zwj is ZERO WIDTH JOINER, which glues emoji into one (👨‍👩‍👧).
const zwj = 0x200D

// plain reports whether s is printable ASCII with single spaces and no
// leading or trailing space: already in normal form.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7F || c == ' ' && (i == 0 || i == len(s)-1 || s[i+1] == ' ') {
			return false
		}
	}
	return true
}

// digitValue is the value of a decimal digit of any script. Unicode encodes
// every set of decimal digits as a contiguous run from 0 to 9 (Unicode
// Standard §4.6, "Numeric Value"), so the value is the distance from the
// start of the run, modulo ten where runs of sets adjoin.
func digitValue(r rune) rune {
	z := r
	for unicode.Is(unicode.Nd, z-1) {
		z--
	}
	return (r - z) % 10
}

func isSkinTone(r rune) bool { return r >= 0x1F3FB && r <= 0x1F3FF }

// isEmoji reports whether r is a pictograph: the emoji and symbol blocks
// from U+1F300 up, the playing-card and mahjong blocks, and the symbols of
// Miscellaneous Symbols and Dingbats. Enclosed alphanumerics (🅰, 🇫🇷) are
// not: they spell letters, which a model reads, so they stay in the text and
// the encoder's coverage decides.
func isEmoji(r rune) bool {
	switch {
	case r >= 0x1F300 && r <= 0x1FAFF, r >= 0x1F000 && r <= 0x1F0FF:
		return true
	case r >= 0x2600 && r <= 0x27BF, r >= 0x2B00 && r <= 0x2BFF:
		return unicode.Is(unicode.So, r)
	}
	return false
}

// confusable maps punctuation that reads as an ASCII dot, slash, backslash,
// colon, dash, apostrophe or double quote to that character (after NFKC,
// which already folds the fullwidth and small forms). The lists follow the
// Unicode confusables data (UTS #39) for those characters, restricted to
// punctuation, symbols and the modifier letters written as punctuation (ː,
// ʼ, ꓸ): letters of words that look alike (a Cyrillic о in a Latin word) are
// left to the guard, which asks a word mixing scripts for a verbatim
// counterpart.
func confusable(r rune) (rune, bool) {
	if r < 0x80 {
		return r, false
	}
	switch r {
	case '。', '·', '‧', '∙', '⋅', '・', '٫', '۔', '܁', '܂', '⸱', '⸳', '᛫', '⸼', 'ꓸ':
		return '.', true
	case '∕', '⁄', '⧸', '╱', '〳', '⟋':
		return '/', true
	case '∖', '⧵', '⧹', '⟍':
		return '\\', true
	case '∶', 'ː', '˸', '꞉', '։', '׃', '܃', '܄', '᛬', '፡', '᠄', 'ꓽ':
		return ':', true
	case '−', '⁃', '˗', '‐', '‑', '‒', '–', '—', '―', '⸺', '⸻', '﹘':
		return '-', true
	case '‘', '’', '‛', '′', 'ʼ', 'ʹ', '´':
		return '\'', true
	case '“', '”', '‟', '″', '«', '»', '〝', '〞':
		return '"', true
	}
	if unicode.Is(unicode.Pd, r) {
		return '-', true
	}
	return r, false
}
