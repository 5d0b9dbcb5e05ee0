package gemini

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// The tests moved here from package proxy keep the names they had there.
type (
	sseEvent        = wire.Event
	StreamAssembler = wire.StreamAssembler
)

const resumeInstruction = wire.ResumeInstruction

var errNoResume = wire.ErrNoResume

// jsonEqual is the helper of package proxy's tests that these tests use.
func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("not JSON: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

// decodeNumbers and reformat are the key tests' helpers of package cache.

// decodeNumbers decodes body keeping numbers as json.Number.
func decodeNumbers(t testing.TB, body []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

// reformat writes v back as JSON that means the same but looks different:
// object keys in reverse order, whitespace everywhere, every number with a
// redundant fraction digit, strings escaped the encoding/json way.
func reformat(t testing.TB, v any) []byte {
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
