package flow

import (
	"testing"

	"github.com/breakwater-dev/breakwater/cache"
)

// TestScanShapeMatchesKey: where scanShape reads a body, it reads what the
// Chat Completions key reads; where it cannot (repeated fields, escapes,
// bad JSON), it says so and the strict decoding decides.
func TestScanShapeMatchesKey(t *testing.T) {
	for _, body := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"a \"model\": b"}]}`,
		` { "stream" : true , "model" : "m" , "messages":[{"role":"user","content":"hi"}], "stream_options" : {"include_usage":true} } `,
		`{"messages":[{"role":"user","content":"x"}],"stream":null,"n":2,"nested":{"model":"no"},"model":"m2","MODEL":"cheap"}`,
	} {
		var got requestShape
		if err := scanShape([]byte(body), &got); err != nil {
			t.Fatalf("scanShape(%s): %v", body, err)
		}
		k, err := chatFormat.Key(cache.SharedPartition, nil, []byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Model != k.Model || got.Stream != k.Stream || got.IncludeUsage != k.IncludeUsage {
			t.Errorf("scanShape(%s) = %+v, the key reads model %q stream %v include_usage %v", body, got, k.Model, k.Stream, k.IncludeUsage)
		}
	}
	for _, bad := range []string{``, `[]`, `{"model":1}`, `{"stream":"yes"}`, `{"model":"a"`, `{"model":"a"} x`, `{"a" 1}`,
		`{"model":"a","model":"b"}`, `{"model":"m\u00e9"}`, `{"model":"a","stream":true,"stream":false}`} {
		var s requestShape
		if err := scanShape([]byte(bad), &s); err == nil {
			t.Errorf("scanShape(%q) accepted it", bad)
		}
	}
}
