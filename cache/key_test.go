package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/cache/keytest"
)

// The key tests' shared helpers (cache/keytest).
var addSeeds = keytest.AddSeeds

func TestCanonicalNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"0.000", "0"},
		{"1", "1"},
		{"1.0", "1"},
		{"-2.50", "-2.5"},
		{"1e2", "100"},
		{"1E+2", "100"},
		{"1.5e1", "15"},
		{"150e-2", "1.5"},
		{"0.001", "0.001"},
		{"0.000001", "0.000001"},
		{"1e-7", "1e-7"},
		{"1.25e-7", "1.25e-7"},
		{"123456789012345678901", "123456789012345678901"},
		{"1e21", "1e21"},
		{"12345678901234567890123", "1.2345678901234567890123e22"},
		{"0.0e999999", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := canonicalNumber(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("canonicalNumber(%s) = %s, want %s", tt.in, got, tt.want)
			}
			again, err := canonicalNumber(got)
			if err != nil || again != got {
				t.Errorf("canonicalNumber(%s) = %s, %v; not idempotent", got, again, err)
			}
		})
	}
	if _, err := canonicalNumber("1e1000000"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("canonicalNumber(1e1000000) error = %v, want ErrBadRequest", err)
	}
}

// FuzzDecodeObject checks the strict decoder against encoding/json: whatever
// it accepts, encoding/json decodes to the same value; whatever it refuses
// that encoding/json accepts is refused for one of its documented reasons.
func FuzzDecodeObject(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"model":"gpt","MODEL":"cheap","s":"zz\ud800zz"}`))
	f.Add([]byte(`{"s":"\ud83d\ude00\u00e9\/\b\f\n\r\t\"\\"}`))
	f.Add([]byte(`{"n":[-0,0.5e+3,1E-2,12345678901234567890]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeObject(body)
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var want any
		werr := dec.Decode(&want)
		if werr == nil {
			if _, terr := dec.Token(); terr != io.EOF {
				werr = errors.New("trailing data")
			}
		}
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			if werr == nil {
				msg := err.Error()
				if !strings.Contains(msg, "duplicate field") && !strings.Contains(msg, "lone surrogate") &&
					!strings.Contains(msg, "must be a JSON object") && !strings.Contains(msg, "UTF-8") {
					t.Fatalf("refused what encoding/json accepts, for no documented reason: %v", err)
				}
			}
			return
		}
		if werr != nil {
			t.Fatalf("accepted what encoding/json refuses (%v): %q", werr, body)
		}
		if !reflect.DeepEqual(any(got), want) {
			t.Fatalf("decoded %#v, encoding/json %#v", got, want)
		}
	})
}
