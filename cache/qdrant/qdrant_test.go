package qdrant_test

import (
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
	bwqdrant "github.com/breakwater-dev/breakwater/cache/qdrant"
	"github.com/breakwater-dev/breakwater/cache/qdrant/qdranttest"
	"github.com/qdrant/go-client/qdrant"
)

const liveEnv = "BREAKWATER_QDRANT_URL"

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// open opens an index on addr and closes it when the test ends.
func open(t *testing.T, addr string, o bwqdrant.Options) *bwqdrant.Index {
	t.Helper()
	o.Addr = addr
	if o.Collection == "" {
		o.Collection = "test"
	}
	if o.EmbedderName == "" {
		o.EmbedderName = "test-embedder"
	}
	if o.Dimension == 0 {
		o.Dimension = 4
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	ix, err := bwqdrant.Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

func TestContractFake(t *testing.T) {
	indextest.Run(t, func(t *testing.T, dim int) cache.Index {
		srv := qdranttest.Start(t)
		return open(t, srv.Addr(), bwqdrant.Options{Dimension: dim})
	})
}

// TestContractLive runs the contract suite against a real Qdrant, one fresh
// collection per subtest, dropped afterwards.
func TestContractLive(t *testing.T) {
	addr := os.Getenv(liveEnv)
	if addr == "" {
		t.Skipf("live Qdrant run needs %s=host:port (gRPC, e.g. localhost:6334)", liveEnv)
	}
	apiKey := os.Getenv("BREAKWATER_QDRANT_API_KEY")
	indextest.Run(t, func(t *testing.T, dim int) cache.Index {
		name := "breakwater_test_" + strings.ToLower(rand.Text()[:12])
		ix := open(t, addr, bwqdrant.Options{Dimension: dim, Collection: name, APIKey: apiKey})
		t.Cleanup(func() { dropCollection(t, addr, apiKey, name) })
		return ix
	})
}

func dropCollection(t *testing.T, addr, apiKey, name string) {
	t.Helper()
	host, port := splitAddr(t, addr)
	c, err := qdrant.NewClient(&qdrant.Config{Host: host, Port: port, APIKey: apiKey, SkipCompatibilityCheck: true, PoolSize: 1})
	if err != nil {
		t.Errorf("drop collection %s: %v", name, err)
		return
	}
	defer c.Close()
	if err := c.DeleteCollection(t.Context(), name); err != nil {
		t.Errorf("drop collection %s: %v", name, err)
	}
}

func splitAddr(t *testing.T, addr string) (string, int) {
	t.Helper()
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
	i := strings.LastIndexByte(addr, ':')
	var port int
	for _, c := range addr[i+1:] {
		port = port*10 + int(c-'0')
	}
	return addr[:i], port
}

func TestPointID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	keys := []string{indextest.Key("a"), indextest.Key("b"), "not-hex", ""}
	seen := map[string]string{}
	for _, k := range keys {
		id := bwqdrant.PointID(k)
		if !uuid.MatchString(id) {
			t.Errorf("PointID(%q) = %q, want a version-8 UUID", k, id)
		}
		if got := bwqdrant.PointID(k); got != id {
			t.Errorf("PointID(%q) not deterministic: %q then %q", k, id, got)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("PointID(%q) = PointID(%q) = %q", k, other, id)
		}
		seen[id] = k
	}
}

// TestReplicasShare opens two indexes (two sidecar replicas) on one Qdrant:
// what one writes, the other finds by exact key and by search, and tenant
// isolation holds across replicas.
func TestReplicasShare(t *testing.T) {
	srv := qdranttest.Start(t)
	r1 := open(t, srv.Addr(), bwqdrant.Options{})
	r2 := open(t, srv.Addr(), bwqdrant.Options{})
	e := cache.Entry{
		Key: indextest.Key("q1"), Partition: "tenant-a", Fingerprint: "fp", Query: "what is 2+2",
		Model: "m", Body: []byte(`{"answer":4}`), Created: time.Now(), Expires: time.Now().Add(time.Hour),
	}
	vec := []float32{1, 0, 0, 0}
	if err := r1.Upsert(t.Context(), []cache.IndexItem{{Entry: e, Vector: vec}}); err != nil {
		t.Fatalf("replica 1 Upsert: %v", err)
	}
	got, ok, err := r2.Get(t.Context(), e.Key)
	if err != nil || !ok {
		t.Fatalf("replica 2 Get = (%v, %v), want the entry", ok, err)
	}
	if got, want := string(got.Body), string(e.Body); got != want {
		t.Errorf("replica 2 Get body = %s, want %s", got, want)
	}
	near := []float32{0.99, 0.1, 0, 0}
	ms, err := r2.Search(t.Context(), cache.SearchQuery{Partition: "tenant-a", Fingerprint: "fp", Vector: near, Threshold: 0.9})
	if err != nil {
		t.Fatalf("replica 2 Search: %v", err)
	}
	if got, want := len(ms), 1; got != want {
		t.Fatalf("replica 2 Search: %d matches, want %d", got, want)
	}
	ms, err = r2.Search(t.Context(), cache.SearchQuery{Partition: "tenant-b", Fingerprint: "fp", Vector: near, Threshold: 0})
	if err != nil {
		t.Fatalf("replica 2 Search as tenant-b: %v", err)
	}
	if got, want := len(ms), 0; got != want {
		t.Errorf("tenant-b Search: %d matches of tenant-a, want %d", got, want)
	}
}

func TestOpenCreatesCollection(t *testing.T) {
	srv := qdranttest.Start(t)
	open(t, srv.Addr(), bwqdrant.Options{Collection: "cache", Dimension: 8, EmbedderName: "builtin/minilm"})
	if got, want := strings.Join(srv.Collections(), ","), "cache"; got != want {
		t.Errorf("collections = %q, want %q", got, want)
	}
	idx := srv.FieldIndexes("cache")
	for field, want := range map[string]qdrant.FieldType{
		"partition":   qdrant.FieldType_FieldTypeKeyword,
		"fingerprint": qdrant.FieldType_FieldTypeKeyword,
		"expires":     qdrant.FieldType_FieldTypeInteger,
		"kind":        qdrant.FieldType_FieldTypeKeyword,
	} {
		if got, ok := idx[field]; !ok || got != want {
			t.Errorf("payload index on %q = %v (present %v), want %v", field, got, ok, want)
		}
	}
	// Reopening an existing, matching collection creates nothing new.
	before := srv.Calls("CreateFieldIndex")
	open(t, srv.Addr(), bwqdrant.Options{Collection: "cache", Dimension: 8, EmbedderName: "builtin/minilm"})
	if got, want := srv.Calls("CreateFieldIndex"), before; got != want {
		t.Errorf("CreateFieldIndex calls after reopen = %d, want %d", got, want)
	}
	if got, want := srv.Calls("Create"), 1; got != want {
		t.Errorf("collection Create calls = %d, want %d", got, want)
	}
}

func TestReopenMismatch(t *testing.T) {
	tests := []struct {
		name      string
		dim       int
		embedder  string
		wantErr   error
		wantInMsg string
	}{
		{"same", 4, "e1", nil, ""},
		{"other dimension", 8, "e1", cache.ErrDimension, "4-dimensional"},
		{"other embedder", 4, "e2", cache.ErrEmbedderMismatch, `built by embedder "e1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := qdranttest.Start(t)
			first := open(t, srv.Addr(), bwqdrant.Options{Dimension: 4, EmbedderName: "e1"})
			if err := first.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			ix, err := bwqdrant.Open(t.Context(), bwqdrant.Options{
				Addr: srv.Addr(), Collection: "test", Dimension: tc.dim, EmbedderName: tc.embedder, Logger: quietLogger(),
			})
			if ix != nil {
				t.Cleanup(func() { _ = ix.Close() })
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Open err = %v, want %v", err, tc.wantErr)
			}
			for _, want := range []string{tc.wantInMsg, "vector.qdrant.collection", "delete the collection"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open err = %q, want it to mention %q", err, want)
				}
			}
		})
	}
}

// TestAdoptCollectionWithoutMetadata: a collection made by hand with the
// right dimension is used, and the embedder is recorded so that the next
// embedder change is caught.
func TestAdoptCollectionWithoutMetadata(t *testing.T) {
	srv := qdranttest.Start(t)
	host, port := splitAddr(t, srv.Addr())
	c, err := qdrant.NewClient(&qdrant.Config{Host: host, Port: port, SkipCompatibilityCheck: true, PoolSize: 1})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer c.Close()
	if err := c.CreateCollection(t.Context(), &qdrant.CreateCollection{
		CollectionName: "test",
		VectorsConfig:  qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 4, Distance: qdrant.Distance_Cosine}),
	}); err != nil {
		t.Fatalf("CreateCollection: %v", err)
	}
	open(t, srv.Addr(), bwqdrant.Options{Dimension: 4, EmbedderName: "e1"})
	_, err = bwqdrant.Open(t.Context(), bwqdrant.Options{Addr: srv.Addr(), Collection: "test", Dimension: 4, EmbedderName: "e2", Logger: quietLogger()})
	if !errors.Is(err, cache.ErrEmbedderMismatch) {
		t.Errorf("Open with another embedder after adoption: err = %v, want ErrEmbedderMismatch", err)
	}
}

func TestOpenOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		opts bwqdrant.Options
		want string
	}{
		{"no dimension", bwqdrant.Options{EmbedderName: "e"}, "dimension must be positive"},
		{"no embedder", bwqdrant.Options{Dimension: 4}, "embedder name is required"},
		{"no port", bwqdrant.Options{Dimension: 4, EmbedderName: "e", Addr: "qdrant"}, "want host:port"},
		{"bad port", bwqdrant.Options{Dimension: 4, EmbedderName: "e", Addr: "qdrant:http"}, "bad port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := bwqdrant.Open(t.Context(), tc.opts)
			if ix != nil {
				_ = ix.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestAPIKey(t *testing.T) {
	srv := qdranttest.Start(t, qdranttest.WithAPIKey("s3cret"))
	ix := open(t, srv.Addr(), bwqdrant.Options{APIKey: "s3cret"})
	if _, err := ix.Len(t.Context()); err != nil {
		t.Errorf("Len with the right key: %v", err)
	}
	_, err := bwqdrant.Open(t.Context(), bwqdrant.Options{Addr: srv.Addr(), Collection: "test", Dimension: 4, EmbedderName: "test-embedder", APIKey: "wrong", Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "Unauthenticated") {
		t.Errorf("Open with a wrong key: err = %v, want Unauthenticated at once", err)
	}
}

func TestSweepDeletesExpired(t *testing.T) {
	srv := qdranttest.Start(t)
	ix := open(t, srv.Addr(), bwqdrant.Options{SweepEvery: 50 * time.Millisecond})
	now := time.Now()
	item := func(label string, expires time.Time) cache.IndexItem {
		return cache.IndexItem{
			Entry:  cache.Entry{Key: indextest.Key(label), Partition: "p", Fingerprint: "f", Created: now, Expires: expires},
			Vector: []float32{1, 0, 0, 0},
		}
	}
	items := []cache.IndexItem{
		item("expired", now.Add(-time.Second)),
		item("live", now.Add(time.Hour)),
		item("never", time.Time{}),
	}
	if err := ix.Upsert(t.Context(), items); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := ix.Len(t.Context())
		if err != nil {
			t.Fatalf("Len: %v", err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Len = %d after 5s of sweeping, want 2 (the expired point deleted)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, it := range items[1:] {
		if _, ok, err := ix.Get(t.Context(), it.Entry.Key); err != nil || !ok {
			t.Errorf("Get(%s) = (%v, %v) after sweep, want kept", it.Entry.Key[:8], ok, err)
		}
	}
}

// TestSettingsMismatch: a collection records the partition secret's
// fingerprint and portable_vectors; a replica with another of either is
// refused with one line naming the setting and the fix, and the secret
// itself is never stored.
func TestSettingsMismatch(t *testing.T) {
	srv := qdranttest.Start(t)
	secret := []byte("the-fleet-partition-secret-0123")
	fp := cache.SecretFingerprint(secret)
	ix := open(t, srv.Addr(), bwqdrant.Options{SecretFingerprint: fp})
	_ = ix.Close()
	tests := []struct {
		name string
		o    bwqdrant.Options
		want string
	}{
		{"other secret", bwqdrant.Options{SecretFingerprint: cache.SecretFingerprint([]byte("another-partition-secret-4567"))}, "cache.partition_secret_env"},
		{"other portable_vectors", bwqdrant.Options{SecretFingerprint: fp, PortableVectors: true}, "embed.portable_vectors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.Addr, o.Collection, o.EmbedderName, o.Dimension, o.Logger = srv.Addr(), "test", "test-embedder", 4, quietLogger()
			ix, err := bwqdrant.Open(t.Context(), o)
			if err == nil {
				_ = ix.Close()
				t.Fatal("Open succeeded, want a refusal")
			}
			if !errors.Is(err, bwqdrant.ErrSettingMismatch) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Open: %v; want one line wrapping ErrSettingMismatch that names %s", err, tt.want)
			}
		})
	}
	// The same settings open, and the secret is not in the collection.
	same := open(t, srv.Addr(), bwqdrant.Options{SecretFingerprint: fp})
	if _, err := same.Len(t.Context()); err != nil {
		t.Fatalf("Len with the same settings: %v", err)
	}
	host, port := splitAddr(t, srv.Addr())
	c, err := qdrant.NewClient(&qdrant.Config{Host: host, Port: port, SkipCompatibilityCheck: true, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.GetCollectionInfo(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	md := info.GetConfig().GetMetadata()
	if md["breakwater_partition_secret_fingerprint"].GetStringValue() != fp {
		t.Errorf("recorded fingerprint = %v, want %s", md["breakwater_partition_secret_fingerprint"], fp)
	}
	for k, v := range md {
		if strings.Contains(v.String(), string(secret)) {
			t.Errorf("metadata %q holds the partition secret", k)
		}
	}
}

// TestFlushReachesOtherReplicas: a DeletePartition through one index is
// handed to every other index's WatchFlushes function (not to its own),
// partition by partition, and does not count as an entry.
func TestFlushReachesOtherReplicas(t *testing.T) {
	srv := qdranttest.Start(t)
	a := open(t, srv.Addr(), bwqdrant.Options{})
	b := open(t, srv.Addr(), bwqdrant.Options{})
	got := make(chan string, 8)
	a.WatchFlushes(func(p string) { t.Errorf("index A was handed its own flush of %q", p) })
	b.WatchFlushes(func(p string) { got <- p })
	for _, p := range []string{"tenant-a", ""} {
		if err := a.DeletePartition(t.Context(), p); err != nil {
			t.Fatalf("DeletePartition(%q): %v", p, err)
		}
		select {
		case f := <-got:
			if f != p {
				t.Errorf("B was handed a flush of %q, want %q", f, p)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("B did not learn of the flush of %q within 2s", p)
		}
	}
	if n, err := b.Len(t.Context()); err != nil || n != 0 {
		t.Errorf("Len = %d, %v; want 0 (flush records are not entries)", n, err)
	}
}

// TestOwners: an owner put through one index is read through another for
// the same tenant scope only; an unknown or over-long id, or another
// tenant's, is unknown; and owner records are not entries:
// Len leaves them out and a search never returns them.
func TestOwners(t *testing.T) {
	srv := qdranttest.Start(t)
	a := open(t, srv.Addr(), bwqdrant.Options{})
	b := open(t, srv.Addr(), bwqdrant.Options{})
	if err := a.PutOwner(t.Context(), "tenant-a", "resp_abc", "fallback"); err != nil {
		t.Fatalf("PutOwner: %v", err)
	}
	if up, ok, err := b.Owner(t.Context(), "tenant-a", "resp_abc"); err != nil || !ok || up != "fallback" {
		t.Errorf("Owner(resp_abc) at B = %q, %v, %v; want fallback", up, ok, err)
	}
	for _, c := range []struct{ scope, id string }{
		{"tenant-a", "resp_other"},
		{"tenant-a", strings.Repeat("x", 300)},
		{"tenant-b", "resp_abc"}, // another tenant's id
	} {
		if up, ok, err := b.Owner(t.Context(), c.scope, c.id); err != nil || ok {
			t.Errorf("Owner(%s, %.20q) = %q, %v, %v; want unknown", c.scope, c.id, up, ok, err)
		}
	}
	if n, err := b.Len(t.Context()); err != nil || n != 0 {
		t.Errorf("Len = %d, %v; want 0 (owner records are not entries)", n, err)
	}
	m, err := b.Search(t.Context(), cache.SearchQuery{Partition: "", Fingerprint: "", Vector: []float32{1, 0, 0, 0}, Limit: 10})
	if err != nil || len(m) != 0 {
		t.Errorf("Search over the owner record's vector = %v, %v; want nothing", m, err)
	}
}

// TestRefusedLater: a replica that opened while Qdrant was down learns of a
// mismatch once Qdrant answers, and says so through OnRefused, once.
func TestRefusedLater(t *testing.T) {
	srv := qdranttest.Start(t)
	_ = open(t, srv.Addr(), bwqdrant.Options{SecretFingerprint: cache.SecretFingerprint([]byte("the-fleet-partition-secret-0123"))}).Close()
	srv.Stop()
	refused := make(chan error, 2)
	ix := open(t, srv.Addr(), bwqdrant.Options{
		SecretFingerprint: cache.SecretFingerprint([]byte("another-partition-secret-4567")),
		Timeout:           200 * time.Millisecond,
		OnRefused:         func(err error) { refused <- err },
	})
	if _, err := ix.Len(t.Context()); !errors.Is(err, bwqdrant.ErrNotReady) {
		t.Fatalf("Len with Qdrant down: %v, want ErrNotReady", err)
	}
	srv.Restart(t)
	select {
	case err := <-refused:
		if !errors.Is(err, bwqdrant.ErrSettingMismatch) {
			t.Errorf("OnRefused(%v), want ErrSettingMismatch", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("OnRefused not called within 15s of Qdrant's return")
	}
	if _, err := ix.Len(t.Context()); !errors.Is(err, bwqdrant.ErrSettingMismatch) {
		t.Errorf("Len after the refusal: %v, want ErrSettingMismatch", err)
	}
}
