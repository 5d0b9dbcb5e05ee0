// Package keytest holds the helpers that the key tests of package cache and
// of the wire APIs' packages share: reading a request from testdata, and
// writing a request back as JSON that means the same but looks different,
// which every key must see through. Tests import it; nothing else does.
package keytest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ReadRequest reads testdata/requests/name of the calling test's package.
func ReadRequest(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "requests", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// DecodeNumbers decodes body keeping numbers as json.Number.
func DecodeNumbers(t testing.TB, body []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

// Reformat writes v back as JSON that means the same but looks different:
// object keys in reverse order, whitespace everywhere, every number with a
// redundant fraction digit, strings escaped the encoding/json way.
func Reformat(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			slices.Reverse(keys)
			b.WriteString("{\n ")
			for i, k := range keys {
				if i > 0 {
					b.WriteString(" ,\t")
				}
				kb, _ := json.Marshal(k)
				b.Write(kb)
				b.WriteString(" : ")
				walk(x[k])
			}
			b.WriteString("\r\n}")
		case []any:
			b.WriteString("[ ")
			for i, e := range x {
				if i > 0 {
					b.WriteString(" , ")
				}
				walk(e)
			}
			b.WriteString(" ]")
		case json.Number:
			s := string(x)
			mant, exp, hasExp := strings.Cut(s, "e")
			if !hasExp {
				mant, exp, hasExp = strings.Cut(s, "E")
			}
			if strings.Contains(mant, ".") {
				mant += "0"
			} else {
				mant += ".0"
			}
			if hasExp {
				mant += "E" + exp
			}
			b.WriteString(mant)
		default:
			vb, err := json.Marshal(x)
			if err != nil {
				t.Fatalf("marshal %v: %v", x, err)
			}
			b.Write(vb)
		}
	}
	walk(v)
	return b.Bytes()
}

// AddSeeds adds every request in testdata/requests, and two awkward bodies,
// to a fuzz target's corpus.
func AddSeeds(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "requests"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		f.Add(ReadRequest(f, e.Name()))
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"t":[1,1.0,-0,1e400]}`))
	f.Add([]byte(`{"a":{"b":{"c":["\u2028","<&>","\ud800"]}},"a":null}`))
}
