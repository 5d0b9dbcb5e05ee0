package cache

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func newPartitioner(t *testing.T, secret []byte, by ...string) *Partitioner {
	t.Helper()
	p, err := NewPartitioner(secret, by)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPartition(t *testing.T) {
	auth := newPartitioner(t, testSecret, "authorization")
	authNS := newPartitioner(t, testSecret, "authorization", "namespace")
	custom := newPartitioner(t, testSecret, "header:x-tenant-id", "header:X-Org")
	other := newPartitioner(t, []byte("another secret of enough length"), "authorization")
	tests := []struct {
		name string
		p, q *Partitioner
		a, b http.Header
		same bool
	}{
		{"same key", auth, auth, headers("Authorization", "Bearer k1"), headers("Authorization", "Bearer k1"), true},
		{"different keys", auth, auth, headers("Authorization", "Bearer k1"), headers("Authorization", "Bearer k2"), false},
		{"other headers ignored", auth, auth, headers("Authorization", "Bearer k1"), headers("Authorization", "Bearer k1", "X-Breakwater-Namespace", "n"), true},
		{"namespace adds", authNS, authNS, headers("Authorization", "Bearer k1", "X-Breakwater-Namespace", "a"), headers("Authorization", "Bearer k1", "X-Breakwater-Namespace", "b"), false},
		{"namespace absent vs empty", authNS, authNS, headers("Authorization", "Bearer k1"), headers("Authorization", "Bearer k1", "X-Breakwater-Namespace", ""), false},
		{"anonymous shared by anonymous", auth, auth, headers(), headers("Authorization", ""), true},
		{"anonymous is not a tenant", auth, auth, headers(), headers("Authorization", "Bearer k1"), false},
		{"length prefixes", custom, custom, headers("X-Tenant-Id", "a", "X-Org", "bc"), headers("X-Tenant-Id", "ab", "X-Org", "c"), false},
		{"custom header names are case-insensitive", custom, custom, headers("x-tenant-id", "a"), headers("X-TENANT-ID", "a"), true},
		{"secret changes partition", auth, other, headers("Authorization", "Bearer k1"), headers("Authorization", "Bearer k1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pa, pb := tt.p.Partition(tt.a), tt.q.Partition(tt.b)
			if got := pa == pb; got != tt.same {
				t.Errorf("same partition = %v, want %v (%s, %s)", got, tt.same, pa, pb)
			}
			if len(pa) != 64 {
				t.Errorf("partition %q is not a hex HMAC-SHA256", pa)
			}
		})
	}
}

func TestPartitionShared(t *testing.T) {
	p := newPartitioner(t, nil)
	for _, h := range []http.Header{headers(), headers("Authorization", "Bearer k1"), headers("Authorization", "Bearer k2", "X-Breakwater-Namespace", "n")} {
		if got, want := p.Partition(h), SharedPartition; got != want {
			t.Errorf("Partition(%v) = %q, want %q", h, got, want)
		}
	}
}

func TestPartitionDoesNotRevealKey(t *testing.T) {
	p := newPartitioner(t, testSecret, "authorization")
	if got := p.Partition(headers("Authorization", "Bearer sk-secret")); bytes.Contains([]byte(got), []byte("sk-secret")) {
		t.Errorf("partition %q contains the key", got)
	}
}

func TestNewPartitionerErrors(t *testing.T) {
	tests := []struct {
		name   string
		secret []byte
		by     []string
	}{
		{"short secret", []byte("short"), []string{"authorization"}},
		{"unknown selector", testSecret, []string{"cookie"}},
		{"empty header name", testSecret, []string{"header:"}},
		{"bad header name", testSecret, []string{"header:X Tenant"}},
		{"duplicate", testSecret, []string{"authorization", "header:authorization"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewPartitioner(tt.secret, tt.by); err == nil {
				t.Errorf("NewPartitioner(%q) succeeded, want an error", tt.by)
			}
		})
	}
}

func TestLoadOrCreateSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	a, err := LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(a), 32; got != want {
		t.Fatalf("secret has %d bytes, want %d", got, want)
	}
	fi, err := os.Stat(filepath.Join(dir, SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode().Perm(), os.FileMode(0o600); got != want {
		t.Errorf("secret mode = %v, want %v", got, want)
	}
	b, err := LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("second call returned a different secret")
	}
	if other, err := LoadOrCreateSecret(t.TempDir()); err != nil || bytes.Equal(a, other) {
		t.Errorf("a new folder gave the same secret (%v)", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(entries), 1; got != want {
		t.Errorf("data folder holds %d files, want %d (temp files left behind?)", got, want)
	}
}

func TestLoadOrCreateSecretConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	secrets := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { secrets[i], errs[i] = LoadOrCreateSecret(dir) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !bytes.Equal(secrets[i], secrets[0]) {
			t.Fatalf("caller %d got a different secret", i)
		}
	}
}

func TestLoadOrCreateSecretRejectsShort(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SecretFile), []byte("tiny"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateSecret(dir); err == nil {
		t.Error("LoadOrCreateSecret accepted a 4-byte secret")
	}
}

// Anthropic clients send their key as x-api-key (older SDKs, curl) or as
// Authorization: Bearer (current SDKs): one key is one tenant either way, and
// two keys are two tenants.
func TestPartitionAPIKeyHeaders(t *testing.T) {
	p := newPartitioner(t, []byte("0123456789abcdef0123"), ByAuthorization, ByNamespace)
	bearer := p.Partition(headers("Authorization", "Bearer sk-ant-a"))
	xkey := p.Partition(headers("X-Api-Key", "sk-ant-a"))
	both := p.Partition(headers("X-Api-Key", "sk-ant-a", "Authorization", "Bearer sk-ant-a"))
	other := p.Partition(headers("X-Api-Key", "sk-ant-b"))
	anon := p.Partition(headers())
	if bearer != xkey || bearer != both {
		t.Errorf("one key, three partitions: bearer %s, x-api-key %s, both %s", bearer, xkey, both)
	}
	if other == xkey || other == anon || xkey == anon {
		t.Errorf("two keys or no key share a partition: a %s, b %s, none %s", xkey, other, anon)
	}
	if ns := p.Partition(headers("X-Api-Key", "sk-ant-a", NamespaceHeader, "t1")); ns == xkey {
		t.Errorf("namespace ignored with x-api-key")
	}
}

// TestPartitionMemo: a partition answered from the memo is the one computed
// afresh, tenants interleaved never get each other's, and the memo stays
// within its bounds (entries, and inputs too long to keep).
func TestPartitionMemo(t *testing.T) {
	p := newPartitioner(t, testSecret, "authorization", "namespace")
	long := "Bearer sk-" + string(bytes.Repeat([]byte("x"), partitionMemoInput))
	keys := []http.Header{
		headers("Authorization", "Bearer k1"),
		headers("Authorization", "Bearer k2"),
		headers("x-api-key", "k1"),
		headers("Authorization", "Bearer k1", "X-Breakwater-Namespace", "n"),
		headers("Authorization", long),
	}
	want := make([]string, len(keys))
	for i, h := range keys {
		want[i] = newPartitioner(t, testSecret, "authorization", "namespace").Partition(h) // empty memo
	}
	for round := range 3 {
		for i, h := range keys {
			if got := p.Partition(h); got != want[i] {
				t.Fatalf("round %d, key %d: partition %s, want %s", round, i, got, want[i])
			}
		}
	}
	if want[0] == want[1] || want[0] != want[2] || want[0] == want[3] {
		t.Fatalf("partitions %v: k1 and k2 must differ, Bearer k1 and x-api-key k1 must match, the namespace must count", want)
	}
	p.memo.mu.RLock()
	n := len(p.memo.m)
	p.memo.mu.RUnlock()
	if n != len(keys)-2 { // x-api-key k1 shares Bearer k1's input; the long key is not kept
		t.Errorf("memo holds %d inputs, want %d", n, len(keys)-2)
	}
	for i := range partitionMemoEntries + 10 {
		p.Partition(headers("Authorization", "Bearer many-"+strconv.Itoa(i)))
	}
	p.memo.mu.RLock()
	n = len(p.memo.m)
	p.memo.mu.RUnlock()
	if n > partitionMemoEntries {
		t.Errorf("memo holds %d inputs, bound is %d", n, partitionMemoEntries)
	}
}
