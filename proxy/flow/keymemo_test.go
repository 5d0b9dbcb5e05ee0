package flow

import (
	"testing"

	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

// TestKeyMemo: a body keyed once is keyed from the memo the second time,
// with the same key a parse gives; the partition is part of the memo key,
// so tenant B never gets tenant A's key for the same bytes.
func TestKeyMemo(t *testing.T) {
	m, err := newKeyMemo()
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	s := &Flow{keys: m}
	body := []byte(`{"model":"gpt-test","temperature":0.5,"messages":[{"role":"user","content":"hi"}]}`)
	first, err := s.requestKey(chatFormat, "tenant-a", nil, body)
	if err != nil {
		t.Fatal(err)
	}
	m.c.Wait()
	if _, ok := m.get(m.digest("tenant-a", openai.ChatEndpoint, body)); !ok {
		t.Fatal("the key was not remembered")
	}
	again, err := s.requestKey(chatFormat, "tenant-a", nil, body)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := openai.ChatKey("tenant-a", body, nil)
	if again.Exact != parsed.Exact || again.Fingerprint != parsed.Fingerprint || again.Query != parsed.Query || *again.Temperature != 0.5 {
		t.Errorf("memo key %+v, parse gives %+v", again, parsed)
	}
	if again.Temperature == first.Temperature {
		t.Error("callers share one Temperature")
	}
	other, err := s.requestKey(chatFormat, "tenant-b", nil, body)
	if err != nil {
		t.Fatal(err)
	}
	if other.Partition != "tenant-b" || other.Exact == first.Exact {
		t.Errorf("tenant B got key %+v for tenant A's bytes", other)
	}
	if _, err := s.requestKey(chatFormat, "tenant-a", nil, []byte(`{"model":""}`)); err == nil {
		t.Error("a bad body was keyed")
	}
}
