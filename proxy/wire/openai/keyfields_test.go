package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/breakwater-dev/breakwater/cache"
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
	if _, err := GenericKey("p", "/v1/embeddings", []byte(`{"input":"x"}`)); !errors.Is(err, cache.ErrBadRequest) {
		t.Errorf("GenericKey without model error = %v, want cache.ErrBadRequest", err)
	}
}

func FuzzCanonical(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := Canonical(body)
		if err != nil {
			if !errors.Is(err, cache.ErrBadRequest) {
				t.Fatalf("Canonical error %v is not cache.ErrBadRequest", err)
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
