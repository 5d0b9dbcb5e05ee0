package stored

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

func TestRewriteIdentity(t *testing.T) {
	now := time.Unix(1800000000, 0)
	for _, tc := range []struct {
		name, body string
		prefix     string
	}{
		{"chat", `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"choices":[{"message":{"content":"{\"id\":\"x\"}"}}]}`, "chatcmpl-bw"},
		{"spaces and order", "{ \"choices\" : [ {\"index\":0} ] ,\n \"created\" : 1 , \"id\" : \"cmpl-9\" }", "cmpl-bw"},
		{"nested id untouched", `{"data":[{"id":"keep","created":5}],"id":"chatcmpl-2","created":2}`, "chatcmpl-bw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := rewriteIdentity([]byte(tc.body), now)
			var got, orig map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("rewritten body is not JSON: %v\n%s", err, out)
			}
			_ = json.Unmarshal([]byte(tc.body), &orig)
			id, _ := got["id"].(string)
			if !strings.HasPrefix(id, tc.prefix) || id == orig["id"] {
				t.Errorf("id %q, want a fresh %s… id", id, tc.prefix)
			}
			if got, want := got["created"], float64(now.Unix()); got != want {
				t.Errorf("created %v, want %v", got, want)
			}
			delete(got, "id")
			delete(got, "created")
			delete(orig, "id")
			delete(orig, "created")
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(orig)
			if string(a) != string(b) {
				t.Errorf("other fields changed:\n got %s\nwant %s", a, b)
			}
		})
	}
	for _, bad := range []string{`[1]`, `not json`, `{"id":"x"`, ``} {
		if got := string(rewriteIdentity([]byte(bad), now)); got != bad {
			t.Errorf("rewriteIdentity(%q) = %q, want it unchanged", bad, got)
		}
	}
}

func FuzzRewriteIdentity(f *testing.F) {
	f.Add(`{"id":"chatcmpl-1","created":1,"choices":[]}`)
	f.Add(`{"a":"\"}","id":"x"}`)
	f.Fuzz(func(t *testing.T, body string) {
		out := rewriteIdentity([]byte(body), time.Unix(1, 0))
		if json.Valid([]byte(body)) && !json.Valid(out) {
			t.Errorf("valid input %q became invalid %q", body, out)
		}
	})
}

// TestWireBodyWrite: a prepared body is written with a Content-Length that
// matches what is written, fresh identity values, and the stored bytes
// untouched (they are shared by every hit).
func TestWireBodyWrite(t *testing.T) {
	now := time.Unix(1800000000, 0)
	for _, body := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"choices":[]}`,
		`{"created":7,"id":"cmpl-9"}`,
		`{"object":"list","data":[]}`,
		`not json`,
	} {
		stored := []byte(body)
		e := cache.Entry{Body: stored, Wire: prepareWire(stored)}
		rec := httptest.NewRecorder()
		if err := wireOf(&e).Write(rec, now); err != nil {
			t.Fatal(err)
		}
		if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(rec.Body.Len()); got != want {
			t.Errorf("%s: Content-Length %s, %s bytes written", body, got, want)
		}
		if want := string(rewriteIdentity(stored, now)); len(want) != rec.Body.Len() {
			t.Errorf("%s: wrote %q, rewriteIdentity gives %q", body, rec.Body.String(), want)
		}
		if strings.Contains(body, `"id"`) && strings.Contains(rec.Body.String(), `"id":"chatcmpl-1"`) {
			t.Errorf("%s: id not rewritten: %s", body, rec.Body.String())
		}
		if string(stored) != body {
			t.Errorf("stored bytes changed: %s", stored)
		}
	}
}
