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
var (
	readRequest   = keytest.ReadRequest
	decodeNumbers = keytest.DecodeNumbers
	reformat      = keytest.Reformat
	addSeeds      = keytest.AddSeeds
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"key order", `{"a":1,"b":{"y":2,"x":3}}`, `{"b":{"x":3,"y":2},"a":1}`, true},
		{"whitespace", `{"a":[1,2]}`, " {\n\t\"a\" : [ 1 , 2 ] }\r\n", true},
		{"integer and decimal", `{"t":1}`, `{"t":1.0}`, true},
		{"exponent", `{"t":100}`, `{"t":1e2}`, true},
		{"negative zero", `{"t":0}`, `{"t":-0.0}`, true},
		{"unicode escape", `{"s":"é/"}`, `{"s":"\u00e9\/"}`, true},
		{"ignored fields", `{"model":"m"}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"user":"u","metadata":{"k":"v"},"store":true,"service_tier":"flex","request_id":"r1"}`, true},
		{"field name case", `{"model":"m"}`, `{"model":"m","MODEL":"n"}`, false},
		{"escaped U+FFFD is a character", `{"s":"zz\ufffdzz"}`, `{"s":"zz�zz"}`, true},
		{"surrogate pair", `{"s":"\ud83d\ude00"}`, `{"s":"😀"}`, true},
		{"big integers stay exact", `{"seed":12345678901234567890}`, `{"seed":12345678901234567891}`, false},
		{"close decimals stay exact", `{"t":0.30000000000000001}`, `{"t":0.3}`, false},
		{"string case", `{"s":"a"}`, `{"s":"A"}`, false},
		{"string whitespace", `{"s":"a b"}`, `{"s":"a  b"}`, false},
		{"nested ignored names kept", `{"m":[{"user":"x"}]}`, `{"m":[{"user":"y"}]}`, false},
		{"array order", `{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{"number and string", `{"a":1}`, `{"a":"1"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca, err := Canonical([]byte(tt.a))
			if err != nil {
				t.Fatal(err)
			}
			cb, err := Canonical([]byte(tt.b))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := bytes.Equal(ca, cb), tt.same; got != want {
				t.Errorf("Canonical equal = %v, want %v\n a: %s\n b: %s", got, want, ca, cb)
			}
		})
	}
}

func TestCanonicalOutput(t *testing.T) {
	got, err := Canonical([]byte(` {"z": [1.50, {"b": "x\ny\u0001\"", "a": null}], "stream": false, "a": true, "m": 1E-7}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":true,"m":1e-7,"z":[1.5,{"a":null,"b":"x\ny\u0001\""}]}`; string(got) != want {
		t.Errorf("Canonical = %s, want %s", got, want)
	}
}

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

func TestGenericKey(t *testing.T) {
	comp := readRequest(t, "completions.json")
	k, err := GenericKey("p", "/v1/completions", comp)
	if err != nil {
		t.Fatal(err)
	}
	if k.Exact == "" || k.Fingerprint != "" || k.Query != "" || k.SemanticEligible() {
		t.Errorf("GenericKey = %+v, want an exact-only key", k)
	}
	if k.Temperature == nil || *k.Temperature != 0 {
		t.Errorf("Temperature = %v, want 0", k.Temperature)
	}
	other, err := GenericKey("p", "/v1/embeddings", comp)
	if err != nil {
		t.Fatal(err)
	}
	if other.Exact == k.Exact {
		t.Error("same body on another endpoint has the same Exact")
	}
	emb, err := GenericKey("p", "/v1/embeddings", readRequest(t, "embeddings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := emb.Model, "text-embedding-3-small"; got != want {
		t.Errorf("Model = %q, want %q", got, want)
	}
	if _, err := GenericKey("p", "/v1/embeddings", []byte(`{"input":"x"}`)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("GenericKey without model error = %v, want ErrBadRequest", err)
	}
}

func FuzzCanonical(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := Canonical(body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("Canonical error %v is not ErrBadRequest", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Canonical output is not JSON: %s", out)
		}
		again, err := Canonical(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Canonical not idempotent:\n%s\n%s (%v)", out, again, err)
		}
		re, err := Canonical(reformat(t, decodeNumbers(t, body)))
		if err != nil || !bytes.Equal(re, out) {
			t.Fatalf("reformatting changed Canonical:\n%s\n%s (%v)", out, re, err)
		}
	})
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
