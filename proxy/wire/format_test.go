package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestFormatCheck: a Format missing a required field is named at mount;
// an API's error shape needs only Error and StreamError.
func TestFormatCheck(t *testing.T) {
	errs := &Format{
		Error:       ObjectError,
		StreamError: func(err error) []byte { return EventBytes("", []byte(`{}`)) },
	}
	if err := errs.Check(true); err != nil {
		t.Fatalf("an error shape with Error and StreamError: %v", err)
	}
	if err := errs.Check(false); err == nil || err.Error() != "the Format has no Endpoint" {
		t.Fatalf("a cached route without an Endpoint: %v", err)
	}
	full := *errs
	full.Endpoint = "/v1/x"
	full.Key = func(string, http.Header, []byte, func(string) string) (Key, error) { return Key{}, nil }
	full.Finished = func([]byte) bool { return true }
	full.Usage = func([]byte) Usage { return Usage{} }
	full.AnswerText = func([]byte) string { return "" }
	full.Replay = ReplayStored(func(io.Writer, func(), []byte) error { return nil })
	if err := full.Check(false); err == nil || err.Error() != "the Format has no NewAssembler" {
		t.Fatalf("a cached route without NewAssembler: %v", err)
	}
	if err := (&Format{}).Check(true); err == nil || err.Error() != "the Format has no Error" {
		t.Fatalf("an error shape without Error: %v", err)
	}
}

// TestFreshDefault: without FreshIDs a stored body is served as it is.
func TestFreshDefault(t *testing.T) {
	body := []byte(`{"id":"x","created":1}`)
	if got := (&Format{}).Fresh(body, time.Unix(2e9, 0)); !bytes.Equal(got, body) {
		t.Fatalf("Fresh without FreshIDs = %s", got)
	}
}

// TestDeltasBytes: each piece's event is the one json.Marshal gives the
// whole event (the replay golden tests rely on it), HTML escaping included.
func TestDeltasBytes(t *testing.T) {
	var out bytes.Buffer
	d := Deltas{
		Head: append(AppendEventHead(nil, "delta"), `{"delta":`...),
		Tail: []byte(`,"index":3}` + "\n\n"),
	}
	flushes := 0
	pieces := []string{"a <b> & ", "é\u2028\"q\""}
	if err := d.WriteAll(&out, func() { flushes++ }, pieces); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, p := range pieces {
		b, _ := json.Marshal(map[string]any{"delta": p, "index": 3})
		want.Write(EventBytes("delta", b))
	}
	if out.String() != want.String() || flushes != len(pieces) {
		t.Fatalf("deltas (%d flushes):\n%q\nwant\n%q", flushes, out.String(), want.String())
	}
}

// TestResumeBody: turns are appended to the named array, the rest of the
// request kept; an edit's ErrNoResume is returned as it is.
func TestResumeBody(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	out, err := ResumeBody(body, "messages", ContinueTurns("assistant", "Hel", func(role, text string) any {
		return map[string]string{"role": role, "content": text}
	}))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Model    string              `json:"model"`
		Stream   bool                `json:"stream"`
		Messages []map[string]string `json:"messages"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Model != "m" || !got.Stream || len(got.Messages) != 3 ||
		got.Messages[1]["content"] != "Hel" || got.Messages[1]["role"] != "assistant" ||
		got.Messages[2]["content"] != ResumeInstruction || got.Messages[2]["role"] != "user" {
		t.Fatalf("resume body %s", out)
	}
	_, err = ResumeBody(body, "messages", func(map[string]json.RawMessage, []json.RawMessage) ([]json.RawMessage, error) {
		return nil, ErrNoResume
	})
	if err != ErrNoResume { // returned as it is, not wrapped
		t.Fatalf("edit's ErrNoResume: %v", err)
	}
	if _, err := ResumeBody([]byte(`[1]`), "messages", ContinueTurns("assistant", "x", nil)); err == nil {
		t.Fatal("a body that is no object was resumed")
	}
}
