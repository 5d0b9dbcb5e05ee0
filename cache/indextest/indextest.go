// Package indextest is the contract suite that every cache.Index implementation must pass.
//
// Precision the suite accepts (implementations may store less than a
// time.Time): Created and Expires are compared with time.Time.Equal after
// truncation to the millisecond; a zero Expires must come back zero. Scores
// must match a float64 brute-force cosine within 1e-4. Body is opaque bytes
// and must round-trip exactly, including bytes that are not valid UTF-8.
//
// Every subtest calls newIndex for a fresh, empty index of the given
// dimension; newIndex registers its own cleanup (the suite also calls Close,
// which must be safe to call twice).
package indextest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

// Dim is the vector dimension the suite asks newIndex for.
const Dim = 32

// scoreTolerance is how far a reported score may be from the float64 cosine.
const scoreTolerance = 1e-4

// Run runs the contract suite against the implementation that newIndex builds.
func Run(t *testing.T, newIndex func(t *testing.T, dim int) cache.Index) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"UpsertThenGet", testUpsertThenGet},
		{"GetUnknown", testGetUnknown},
		{"UpsertReplaces", testUpsertReplaces},
		{"SearchBestFirst", testSearchBestFirst},
		{"Threshold", testThreshold},
		{"Limit", testLimit},
		{"PartitionIsHardFilter", testPartitionHard},
		{"FingerprintIsHardFilter", testFingerprintHard},
		{"Expired", testExpired},
		{"DeletePartition", testDeletePartition},
		{"Len", testLen},
		{"WrongDimension", testWrongDimension},
		{"RoundTrip", testRoundTrip},
		{"Concurrent", testConcurrent},
		{"CloseTwice", testCloseTwice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := newIndex(t, Dim)
			t.Cleanup(func() { _ = idx.Close() })
			s := &suite{idx: idx, rng: rand.New(rand.NewPCG(42, uint64(len(tc.name)))), now: time.Now()}
			tc.fn(t, s)
		})
	}
}

type suite struct {
	idx cache.Index
	rng *rand.Rand
	now time.Time
}

// Key returns a hex SHA-256 key derived from label, the shape real keys have.
func Key(label string) string {
	sum := sha256.Sum256([]byte(label))
	return hex.EncodeToString(sum[:])
}

// RandomUnit returns a random L2-normalised vector of dim dimensions: the
// zero vector perturbed by unit Gaussian noise.
func RandomUnit(rng *rand.Rand, dim int) []float32 {
	return Perturb(rng, make([]float32, dim), 1)
}

// Perturb returns a unit vector near v: v plus Gaussian noise of scale eps, normalised.
func Perturb(rng *rand.Rand, v []float32, eps float64) []float32 {
	w := make([]float32, len(v))
	var n float64
	for i := range v {
		x := float64(v[i]) + eps*rng.NormFloat64()
		w[i] = float32(x)
		n += x * x
	}
	n = math.Sqrt(n)
	for i := range w {
		w[i] = float32(float64(w[i]) / n)
	}
	return w
}

// Cosine is the float64 cosine similarity of a and b.
func Cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}

func (s *suite) item(label, partition, fingerprint string, vec []float32) cache.IndexItem {
	return cache.IndexItem{
		Entry: cache.Entry{
			Key:         Key(label),
			Partition:   partition,
			Fingerprint: fingerprint,
			Query:       "query " + label,
			Model:       "gpt-test",
			Body:        []byte(`{"id":"` + label + `"}`),
			Created:     s.now.Add(-time.Minute),
			Expires:     s.now.Add(time.Hour),
		},
		Vector: vec,
	}
}

func (s *suite) upsert(t *testing.T, items ...cache.IndexItem) {
	t.Helper()
	if err := s.idx.Upsert(t.Context(), items); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func (s *suite) search(t *testing.T, q cache.SearchQuery) []cache.Match {
	t.Helper()
	ms, err := s.idx.Search(t.Context(), q)
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	return ms
}

func (s *suite) length(t *testing.T) int {
	t.Helper()
	n, err := s.idx.Len(t.Context())
	if err != nil {
		t.Fatalf("Len: %v", err)
	}
	return n
}

func (s *suite) mustGet(t *testing.T, key string) cache.Entry {
	t.Helper()
	e, ok, err := s.idx.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	if !ok {
		t.Fatalf("Get(%s): not found", key)
	}
	return e
}

func (s *suite) mustMiss(t *testing.T, key string) {
	t.Helper()
	e, ok, err := s.idx.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	if ok {
		t.Fatalf("Get(%s) = %q, want not found", key, e.Query)
	}
}

// equalEntry reports how got differs from want at the suite's precision.
func equalEntry(got, want cache.Entry) error {
	ms := func(tm time.Time) time.Time { return tm.Truncate(time.Millisecond) }
	switch {
	case got.Key != want.Key:
		return fmt.Errorf("entry.Key = %q, want %q", got.Key, want.Key)
	case got.Partition != want.Partition:
		return fmt.Errorf("entry.Partition = %q, want %q", got.Partition, want.Partition)
	case got.Fingerprint != want.Fingerprint:
		return fmt.Errorf("entry.Fingerprint = %q, want %q", got.Fingerprint, want.Fingerprint)
	case got.Query != want.Query:
		return fmt.Errorf("entry.Query = %q, want %q", got.Query, want.Query)
	case got.Model != want.Model:
		return fmt.Errorf("entry.Model = %q, want %q", got.Model, want.Model)
	case got.User != want.User:
		return fmt.Errorf("entry.User = %q, want %q", got.User, want.User)
	case got.Agreed != want.Agreed:
		return fmt.Errorf("entry.Agreed = %v, want %v", got.Agreed, want.Agreed)
	case !bytes.Equal(got.Body, want.Body):
		return fmt.Errorf("entry.Body = %q, want %q", got.Body, want.Body)
	case !ms(got.Created).Equal(ms(want.Created)):
		return fmt.Errorf("entry.Created = %v, want %v", got.Created, want.Created)
	case got.Expires.IsZero() != want.Expires.IsZero() || !ms(got.Expires).Equal(ms(want.Expires)):
		return fmt.Errorf("entry.Expires = %v, want %v", got.Expires, want.Expires)
	}
	return nil
}
