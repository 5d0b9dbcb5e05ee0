package qdrant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
	bwqdrant "github.com/breakwater-dev/breakwater/cache/qdrant"
	"github.com/breakwater-dev/breakwater/cache/qdrant/qdranttest"
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func entryItem(label string) cache.IndexItem {
	return cache.IndexItem{
		Entry: cache.Entry{
			Key: indextest.Key(label), Partition: "p", Fingerprint: "f", Query: label,
			Body: []byte(label), Created: time.Now(), Expires: time.Now().Add(time.Hour),
		},
		Vector: []float32{1, 0, 0, 0},
	}
}

// calls are the index operations an outage must not hang.
func calls(ix *bwqdrant.Index) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"Upsert": func(ctx context.Context) error { return ix.Upsert(ctx, []cache.IndexItem{entryItem("x")}) },
		"Search": func(ctx context.Context) error {
			_, err := ix.Search(ctx, cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: []float32{1, 0, 0, 0}})
			return err
		},
		"Get": func(ctx context.Context) error {
			_, _, err := ix.Get(ctx, indextest.Key("a"))
			return err
		},
		"DeletePartition": func(ctx context.Context) error { return ix.DeletePartition(ctx, "nobody") },
		"Len": func(ctx context.Context) error {
			_, err := ix.Len(ctx)
			return err
		},
		"Ping": ix.Ping,
	}
}

// eventually polls f until it returns nil or the wait is over.
func eventually(t *testing.T, wait time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOutageFailsFastThenReconnects(t *testing.T) {
	const timeout = 500 * time.Millisecond
	srv := qdranttest.Start(t)
	ix := open(t, srv.Addr(), bwqdrant.Options{Timeout: timeout})
	if err := ix.Upsert(t.Context(), []cache.IndexItem{entryItem("a")}); err != nil {
		t.Fatalf("Upsert before outage: %v", err)
	}

	srv.Stop()
	for name, call := range calls(ix) {
		t.Run("down/"+name, func(t *testing.T) {
			start := time.Now()
			err := call(t.Context())
			if err == nil {
				t.Fatalf("%s with Qdrant stopped: nil error", name)
			}
			if got, limit := time.Since(start), timeout+500*time.Millisecond; got > limit {
				t.Errorf("%s took %v with Qdrant stopped, want at most %v (err %v)", name, got, limit, err)
			}
		})
	}

	srv.Restart(t)
	eventually(t, 10*time.Second, "Upsert after restart", func() error {
		return ix.Upsert(t.Context(), []cache.IndexItem{entryItem("b")})
	})
	for _, label := range []string{"a", "b"} {
		if _, ok, err := ix.Get(t.Context(), indextest.Key(label)); err != nil || !ok {
			t.Errorf("Get(%s) after restart = (%v, %v), want found", label, ok, err)
		}
	}
	if err := ix.Ping(t.Context()); err != nil {
		t.Errorf("Ping after restart: %v", err)
	}
}

func TestSlowQdrantTimesOut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv := qdranttest.Start(t)
	ix := open(t, srv.Addr(), bwqdrant.Options{Timeout: timeout})
	srv.SetDelay(5 * time.Second)
	for name, call := range calls(ix) {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := call(t.Context())
			if got, want := status.Code(err), codes.DeadlineExceeded; got != want {
				t.Errorf("%s against a stalled Qdrant: code %v (err %v), want %v", name, got, err, want)
			}
			if got, limit := time.Since(start), timeout+500*time.Millisecond; got > limit {
				t.Errorf("%s took %v, want at most %v", name, got, limit)
			}
		})
	}
	srv.SetDelay(0)
	if _, err := ix.Len(t.Context()); err != nil {
		t.Errorf("Len once Qdrant is fast again: %v", err)
	}
}

// TestOpenWhileQdrantDown: the sidecar starts without Qdrant; the index is
// not ready (fast errors), and becomes ready by itself when Qdrant comes up.
func TestOpenWhileQdrantDown(t *testing.T) {
	srv := qdranttest.Start(t)
	srv.Stop()
	start := time.Now()
	ix := open(t, srv.Addr(), bwqdrant.Options{Timeout: 300 * time.Millisecond})
	if got, limit := time.Since(start), time.Second; got > limit {
		t.Errorf("Open with Qdrant down took %v, want at most %v", got, limit)
	}
	for name, call := range calls(ix) {
		if err := call(t.Context()); !errors.Is(err, bwqdrant.ErrNotReady) {
			t.Errorf("%s before Qdrant is up: err = %v, want ErrNotReady", name, err)
		}
	}
	srv.Restart(t)
	eventually(t, 15*time.Second, "Upsert once Qdrant is up", func() error {
		return ix.Upsert(t.Context(), []cache.IndexItem{entryItem("a")})
	})
	if got, want := srv.Collections(), []string{"test"}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("collections = %v, want %v", got, want)
	}
}

// TestMismatchFoundAfterOutage: when the mismatch can only be seen once
// Qdrant answers, the index stays unusable with the mismatch error instead of
// writing into a collection of another embedder.
func TestMismatchFoundAfterOutage(t *testing.T) {
	srv := qdranttest.Start(t)
	other := open(t, srv.Addr(), bwqdrant.Options{Dimension: 8})
	if err := other.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	srv.Stop()
	ix := open(t, srv.Addr(), bwqdrant.Options{Dimension: 4, Timeout: 300 * time.Millisecond})
	srv.Restart(t)
	eventually(t, 15*time.Second, "mismatch reported", func() error {
		if _, err := ix.Len(t.Context()); !errors.Is(err, cache.ErrDimension) {
			return errors.New("not yet: " + errString(err))
		}
		return nil
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestCollectionRecreated: a Qdrant that lost its data (restarted without a
// volume) gets the collection back without restarting the sidecar.
func TestCollectionRecreated(t *testing.T) {
	srv := qdranttest.Start(t)
	ix := open(t, srv.Addr(), bwqdrant.Options{})
	host, port := splitAddr(t, srv.Addr())
	c, err := qdrant.NewClient(&qdrant.Config{Host: host, Port: port, SkipCompatibilityCheck: true, PoolSize: 1})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer c.Close()
	if err := c.DeleteCollection(t.Context(), "test"); err != nil {
		t.Fatalf("DeleteCollection: %v", err)
	}
	if err := ix.Upsert(t.Context(), []cache.IndexItem{entryItem("a")}); err == nil {
		t.Fatalf("Upsert into a deleted collection: nil error")
	}
	eventually(t, 10*time.Second, "Upsert after the collection is recreated", func() error {
		return ix.Upsert(t.Context(), []cache.IndexItem{entryItem("a")})
	})
	if got, want := len(srv.FieldIndexes("test")), 4; got != want {
		t.Errorf("payload indexes on the recreated collection = %d, want %d", got, want)
	}
}
