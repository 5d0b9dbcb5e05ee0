package indextest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

func testUpsertThenGet(t *testing.T, s *suite) {
	it := s.item("a", "p1", "f1", RandomUnit(s.rng, Dim))
	s.upsert(t, it)
	if err := equalEntry(s.mustGet(t, it.Entry.Key), it.Entry); err != nil {
		t.Error(err)
	}
}

func testGetUnknown(t *testing.T, s *suite) {
	s.upsert(t, s.item("a", "p1", "f1", RandomUnit(s.rng, Dim)))
	e, ok, err := s.idx.Get(t.Context(), Key("nope"))
	if err != nil || ok || !reflect.DeepEqual(e, cache.Entry{}) {
		t.Errorf("Get(unknown) = (%+v, %v, %v), want (zero, false, nil)", e, ok, err)
	}
}

func testUpsertReplaces(t *testing.T, s *suite) {
	v1, v2 := RandomUnit(s.rng, Dim), RandomUnit(s.rng, Dim)
	first := s.item("a", "p1", "f1", v1)
	second := s.item("a", "p1", "f1", v2)
	second.Entry.Query, second.Entry.Body = "second", []byte(`{"v":2}`)
	s.upsert(t, first)
	s.upsert(t, second)
	if got, want := s.length(t), 1; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	if got, want := s.mustGet(t, first.Entry.Key).Query, "second"; got != want {
		t.Errorf("Get.Query = %q, want %q", got, want)
	}
	// The old vector is gone: searching with it finds only the new record,
	// at the new record's score.
	ms := s.search(t, cache.SearchQuery{Partition: "p1", Fingerprint: "f1", Vector: v1, Threshold: -1, Limit: 10})
	if got, want := len(ms), 1; got != want {
		t.Fatalf("Search returned %d matches, want %d", got, want)
	}
	if got, want := float64(ms[0].Score), Cosine(v1, v2); math.Abs(got-want) > scoreTolerance {
		t.Errorf("Score = %v, want %v (the replaced vector must not be searched)", got, want)
	}
}

// fill stores n random items in (partition, fingerprint) and returns them.
func (s *suite) fill(t *testing.T, n int, partition, fingerprint string) []cache.IndexItem {
	t.Helper()
	items := make([]cache.IndexItem, n)
	for i := range items {
		items[i] = s.item(fmt.Sprintf("%s/%s/%d", partition, fingerprint, i), partition, fingerprint, RandomUnit(s.rng, Dim))
	}
	s.upsert(t, items...)
	return items
}

type scored struct {
	key   string
	score float64
}

func bruteForce(items []cache.IndexItem, q []float32, threshold float64) []scored {
	var out []scored
	for _, it := range items {
		if c := Cosine(q, it.Vector); c >= threshold {
			out = append(out, scored{it.Entry.Key, c})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].score > out[j].score })
	return out
}

func testSearchBestFirst(t *testing.T, s *suite) {
	items := s.fill(t, 300, "p1", "f1")
	s.fill(t, 50, "p1", "f2") // noise in another bucket
	for i := range 20 {
		q := RandomUnit(s.rng, Dim)
		if i%2 == 0 {
			q = Perturb(s.rng, items[s.rng.IntN(len(items))].Vector, 0.05)
		}
		want := bruteForce(items, q, 0)
		want = want[:min(10, len(want))]
		got := s.search(t, cache.SearchQuery{Partition: "p1", Fingerprint: "f1", Vector: q, Threshold: 0, Limit: 10})
		if len(got) != len(want) {
			t.Fatalf("query %d: %d matches, want %d", i, len(got), len(want))
		}
		for j := range got {
			if got[j].Entry.Key != want[j].key && math.Abs(want[j].score-float64(got[j].Score)) > scoreTolerance {
				t.Errorf("query %d rank %d: key %s, want %s", i, j, got[j].Entry.Key[:8], want[j].key[:8])
			}
			if d := math.Abs(float64(got[j].Score) - want[j].score); d > scoreTolerance {
				t.Errorf("query %d rank %d: score %v, want %v", i, j, got[j].Score, want[j].score)
			}
			if j > 0 && got[j].Score > got[j-1].Score {
				t.Errorf("query %d: rank %d score %v above rank %d score %v", i, j, got[j].Score, j-1, got[j-1].Score)
			}
		}
	}
}

func testThreshold(t *testing.T, s *suite) {
	items := s.fill(t, 100, "p1", "f1")
	for i := range 10 {
		q := Perturb(s.rng, items[i].Vector, 0.25)
		for _, th := range []float32{0.2, 0.5, 0.9, 0.999} {
			// Allow a result within the tolerance of the boundary to fall either way.
			want := bruteForce(items, q, float64(th)-scoreTolerance)
			got := s.search(t, cache.SearchQuery{Partition: "p1", Fingerprint: "f1", Vector: q, Threshold: th, Limit: 100})
			for _, m := range got {
				if m.Score < th {
					t.Errorf("threshold %v: match with score %v", th, m.Score)
				}
			}
			lo, hi := 0, len(want)
			for _, w := range want {
				if w.score >= float64(th)+scoreTolerance {
					lo++
				}
			}
			if len(got) < lo || len(got) > hi {
				t.Errorf("threshold %v: %d matches, want %d", th, len(got), len(want))
			}
		}
	}
}

func testLimit(t *testing.T, s *suite) {
	items := s.fill(t, 50, "p1", "f1")
	q := items[0].Vector
	tests := []struct{ limit, want int }{{0, 1}, {1, 1}, {5, 5}, {50, 50}, {80, 50}}
	for _, tc := range tests {
		got := s.search(t, cache.SearchQuery{Partition: "p1", Fingerprint: "f1", Vector: q, Threshold: -1, Limit: tc.limit})
		if len(got) != tc.want {
			t.Errorf("Limit %d: %d matches, want %d", tc.limit, len(got), tc.want)
			continue
		}
		if got[0].Entry.Key != items[0].Entry.Key {
			t.Errorf("Limit %d: best match %s, want the identical vector", tc.limit, got[0].Entry.Key[:8])
		}
	}
}

func testPartitionHard(t *testing.T, s *suite) {
	v := RandomUnit(s.rng, Dim)
	a := s.item("tenant-a", "A", "f1", v)
	b := s.item("tenant-b", "B", "f1", RandomUnit(s.rng, Dim))
	s.upsert(t, a, b)
	s.fill(t, 20, "A", "f1")
	for _, th := range []float32{-1, 0, 0.5, 1} {
		for _, m := range s.search(t, cache.SearchQuery{Partition: "B", Fingerprint: "f1", Vector: v, Threshold: th, Limit: 100}) {
			if m.Entry.Partition != "B" {
				t.Fatalf("threshold %v: tenant B received tenant %s's entry (score %v)", th, m.Entry.Partition, m.Score)
			}
		}
	}
	got := s.search(t, cache.SearchQuery{Partition: "B", Fingerprint: "f1", Vector: v, Threshold: -1, Limit: 100})
	if len(got) != 1 || got[0].Entry.Key != b.Entry.Key {
		t.Errorf("tenant B search = %d matches, want only B's own entry", len(got))
	}
	got = s.search(t, cache.SearchQuery{Partition: "A", Fingerprint: "f1", Vector: v, Threshold: 0.99, Limit: 1})
	if len(got) != 1 || got[0].Entry.Key != a.Entry.Key {
		t.Errorf("tenant A search = %d matches, want A's identical entry", len(got))
	}
	if len(got) == 1 && got[0].Score < 1-scoreTolerance {
		t.Errorf("identical vector scored %v, want 1", got[0].Score)
	}
}

func testFingerprintHard(t *testing.T, s *suite) {
	v := RandomUnit(s.rng, Dim)
	s.upsert(t, s.item("f1", "A", "f1", v))
	s.fill(t, 10, "A", "f1")
	if got := s.search(t, cache.SearchQuery{Partition: "A", Fingerprint: "f2", Vector: v, Threshold: -1, Limit: 100}); len(got) != 0 {
		t.Errorf("fingerprint f2 search returned %d matches of fingerprint %s, want 0", len(got), got[0].Entry.Fingerprint)
	}
}

func testExpired(t *testing.T, s *suite) {
	v := RandomUnit(s.rng, Dim)
	past := s.item("past", "p1", "f1", v)
	past.Entry.Expires = s.now.Add(-time.Second)
	soon := s.item("soon", "p1", "f1", Perturb(s.rng, v, 0.01))
	soon.Entry.Expires = s.now.Add(time.Hour)
	never := s.item("never", "p1", "f1", Perturb(s.rng, v, 0.02))
	never.Entry.Expires = time.Time{}
	s.upsert(t, past, soon, never)

	s.mustMiss(t, past.Entry.Key)
	s.mustGet(t, soon.Entry.Key)
	s.mustGet(t, never.Entry.Key)

	keys := func(ms []cache.Match) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Entry.Key)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name string
		now  time.Time
		want []string
	}{
		{"default now", time.Time{}, []string{soon.Entry.Key, never.Entry.Key}},
		{"now", s.now, []string{soon.Entry.Key, never.Entry.Key}},
		{"in two hours", s.now.Add(2 * time.Hour), []string{never.Entry.Key}},
		{"at expiry", soon.Entry.Expires, []string{never.Entry.Key}},
	}
	for _, tc := range tests {
		got := keys(s.search(t, cache.SearchQuery{Partition: "p1", Fingerprint: "f1", Vector: v, Threshold: 0, Limit: 10, Now: tc.now}))
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %d keys %v, want %d", tc.name, len(got), short(got), len(want))
		}
	}
}

func short(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k[:min(8, len(k))]
	}
	return out
}

func testDeletePartition(t *testing.T, s *suite) {
	a := s.fill(t, 10, "A", "f1")
	b := s.fill(t, 10, "B", "f1")
	c := s.fill(t, 5, "A", "f2")
	if err := s.idx.DeletePartition(t.Context(), "A"); err != nil {
		t.Fatalf("DeletePartition(A): %v", err)
	}
	for _, it := range append(a, c...) {
		s.mustMiss(t, it.Entry.Key)
	}
	for _, it := range b {
		s.mustGet(t, it.Entry.Key)
	}
	if got := s.search(t, cache.SearchQuery{Partition: "A", Fingerprint: "f1", Vector: a[0].Vector, Threshold: -1, Limit: 10}); len(got) != 0 {
		t.Errorf("search in deleted partition: %d matches, want 0", len(got))
	}
	if got, want := s.length(t), len(b); got != want {
		t.Errorf("Len after DeletePartition(A) = %d, want %d", got, want)
	}
	if got := s.search(t, cache.SearchQuery{Partition: "B", Fingerprint: "f1", Vector: b[0].Vector, Threshold: 0.99, Limit: 1}); len(got) != 1 {
		t.Errorf("search in kept partition: %d matches, want 1", len(got))
	}
	if err := s.idx.DeletePartition(t.Context(), ""); err != nil {
		t.Fatalf(`DeletePartition(""): %v`, err)
	}
	if got, want := s.length(t), 0; got != want {
		t.Errorf(`Len after DeletePartition("") = %d, want %d`, got, want)
	}
	for _, it := range b {
		s.mustMiss(t, it.Entry.Key)
	}
	// The index is still usable afterwards.
	s.fill(t, 3, "A", "f1")
	if got, want := s.length(t), 3; got != want {
		t.Errorf("Len after refill = %d, want %d", got, want)
	}
}

func testLen(t *testing.T, s *suite) {
	if got, want := s.length(t), 0; got != want {
		t.Errorf("Len of empty index = %d, want %d", got, want)
	}
	items := s.fill(t, 7, "A", "f1")
	s.fill(t, 4, "B", "f2")
	if got, want := s.length(t), 11; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	s.upsert(t, items[0])
	if got, want := s.length(t), 11; got != want {
		t.Errorf("Len after re-upsert = %d, want %d", got, want)
	}
}

func testWrongDimension(t *testing.T, s *suite) {
	good := s.item("good", "p1", "f1", RandomUnit(s.rng, Dim))
	s.upsert(t, good)
	for _, d := range []int{Dim - 1, Dim + 1} {
		err := s.idx.Upsert(t.Context(), []cache.IndexItem{s.item("bad", "p1", "f1", RandomUnit(s.rng, d))})
		if !errors.Is(err, cache.ErrDimension) {
			t.Errorf("Upsert with %d dims: err = %v, want ErrDimension", d, err)
		}
		_, err = s.idx.Search(t.Context(), cache.SearchQuery{Partition: "p1", Fingerprint: "f1", Vector: RandomUnit(s.rng, d), Limit: 1})
		if !errors.Is(err, cache.ErrDimension) {
			t.Errorf("Search with %d dims: err = %v, want ErrDimension", d, err)
		}
	}
	s.mustMiss(t, Key("bad"))
	if got, want := s.length(t), 1; got != want {
		t.Errorf("Len after rejected upserts = %d, want %d", got, want)
	}
}

func testRoundTrip(t *testing.T, s *suite) {
	created := time.Date(2026, 3, 14, 15, 9, 26, 535_897_932, time.UTC)
	tests := []cache.Entry{
		{
			Key: Key("json"), Partition: "tenant-ü", Fingerprint: "fp:1",
			Query: "Wie spät ist es? ☃ \"quoted\"\nnext line", Model: "gpt-4o-2024-08-06",
			User: "9f86d081884c7d659a2feaa0c55ad015", Agreed: true,
			Body:    []byte(`{"id":"chatcmpl-1","choices":[{"message":{"content":"h\u00e9llo \"x\"\n"},"finish_reason":"stop"}]}`),
			Created: created, Expires: created.Add(100 * 365 * 24 * time.Hour),
		},
		{
			Key: Key("binary"), Partition: "shared", Fingerprint: "fp:2",
			Query: "", Model: "m",
			Body:    []byte{0, 1, 2, 0xff, 0xfe, '\n', 0},
			Created: created.Add(time.Millisecond), Expires: time.Time{},
		},
		{
			Key: Key("empty body"), Partition: "p", Fingerprint: "f",
			Query: "q", Model: "m", Body: []byte{}, User: "a user hash, not agreed",
			Created: time.Unix(1_700_000_000, 0), Expires: time.Now().Add(time.Hour).In(time.FixedZone("X", 3600)),
		},
	}
	for _, e := range tests {
		s.upsert(t, cache.IndexItem{Entry: e, Vector: RandomUnit(s.rng, Dim)})
	}
	for _, want := range tests {
		if err := equalEntry(s.mustGet(t, want.Key), want); err != nil {
			t.Errorf("Get(%s): %v", want.Key[:8], err)
		}
	}
	// Search returns the same fields.
	v := RandomUnit(s.rng, Dim)
	want := tests[0]
	want.Key = Key("json via search")
	s.upsert(t, cache.IndexItem{Entry: want, Vector: v})
	got := s.search(t, cache.SearchQuery{Partition: want.Partition, Fingerprint: want.Fingerprint, Vector: v, Threshold: 0.99, Limit: 1})
	if len(got) != 1 {
		t.Fatalf("Search: %d matches, want 1", len(got))
	}
	if err := equalEntry(got[0].Entry, want); err != nil {
		t.Errorf("Search: %v", err)
	}
}

func testConcurrent(t *testing.T, s *suite) {
	const writers, perWriter, readers = 4, 30, 4
	vecs := make([][]float32, writers*perWriter)
	for i := range vecs {
		vecs[i] = RandomUnit(s.rng, Dim)
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				n := w*perWriter + i
				part := []string{"A", "B"}[n%2]
				if err := s.idx.Upsert(t.Context(), []cache.IndexItem{s.item(fmt.Sprint("c", n), part, "f1", vecs[n])}); err != nil {
					errs <- fmt.Errorf("upsert %d: %w", n, err)
					return
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for range 50 {
				part := []string{"A", "B"}[r%2]
				ms, err := s.idx.Search(t.Context(), cache.SearchQuery{Partition: part, Fingerprint: "f1", Vector: RandomUnit(rng, Dim), Threshold: -1, Limit: 5})
				if err != nil {
					errs <- fmt.Errorf("search: %w", err)
					return
				}
				for _, m := range ms {
					if m.Entry.Partition != part {
						errs <- fmt.Errorf("search in %s returned an entry of %s", part, m.Entry.Partition)
						return
					}
				}
				if _, _, err := s.idx.Get(t.Context(), Key(fmt.Sprint("c", rng.IntN(len(vecs))))); err != nil {
					errs <- fmt.Errorf("get: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, want := s.length(t), writers*perWriter; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
}

func testCloseTwice(t *testing.T, s *suite) {
	s.fill(t, 3, "A", "f1")
	if err := s.idx.Close(); err != nil {
		t.Errorf("first Close: %v", err)
	}
	if err := s.idx.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
