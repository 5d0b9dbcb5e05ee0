package proxy

import (
	"encoding/json"
	"testing"
)

// TestScanShapeMatchesDecoder: where scanShape reads a body, it reads what
// encoding/json reads; where it cannot, it says so.
func TestScanShapeMatchesDecoder(t *testing.T) {
	for _, body := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"a \"model\": b"}]}`,
		` { "stream" : true , "model" : "m\u00e9" , "stream_options" : {"include_usage":true} } `,
		`{"model":"a","model":"b","stream":false}`,
		`{"messages":[],"stream":null,"n":2,"nested":{"model":"no"}}`,
	} {
		var got, want requestShape
		if err := scanShape([]byte(body), &got); err != nil {
			t.Fatalf("scanShape(%s): %v", body, err)
		}
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Errorf("scanShape(%s) = %s, encoding/json gives %s", body, a, b)
		}
	}
	for _, bad := range []string{``, `[]`, `{"model":1}`, `{"stream":"yes"}`, `{"model":"a"`, `{"model":"a"} x`, `{"a" 1}`} {
		var s requestShape
		if err := scanShape([]byte(bad), &s); err == nil {
			t.Errorf("scanShape(%q) accepted it", bad)
		}
	}
}
