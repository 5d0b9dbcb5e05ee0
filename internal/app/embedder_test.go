package app

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/embed"
)

// TestPortableVectorsSelectsEncoder checks that embed.portable_vectors
// reaches the built-in encoder: with it the app's embedder gives
// NewBuiltinPortable's vectors, without it NewBuiltin's.
func TestPortableVectorsSelectsEncoder(t *testing.T) {
	const text = "How do I reset my password?"
	want := func(newB func() (*embed.Builtin, error)) []float32 {
		t.Helper()
		b, err := newB()
		if err != nil {
			t.Fatal(err)
		}
		v, err := b.Embed(context.Background(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		return v[0]
	}
	portable, fast := want(embed.NewBuiltinPortable), want(embed.NewBuiltin)
	for _, tc := range []struct {
		portable bool
		want     []float32
	}{{false, fast}, {true, portable}} {
		cfg := config.Default()
		cfg.Embed.PortableVectors = tc.portable
		a := &App{cfg: cfg, log: slog.New(slog.DiscardHandler)}
		e, err := a.newEmbedder(context.Background(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Embed(context.Background(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[0], tc.want) {
			t.Errorf("portable_vectors = %v: the app's encoder gave another encoder's vector", tc.portable)
		}
		for _, c := range a.closers {
			_ = c()
		}
	}
}
