package qdranttest_test

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache/qdrant/qdranttest"
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// client dials srv through the real go-client, the path the backend uses.
func client(t *testing.T, srv *qdranttest.Server) *qdrant.Client {
	t.Helper()
	host, portStr, _ := strings.Cut(srv.Addr(), ":")
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatalf("parse port of %s: %v", srv.Addr(), err)
	}
	c, err := qdrant.NewClient(&qdrant.Config{Host: host, Port: port, SkipCompatibilityCheck: true, PoolSize: 1})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// seeded starts a server with collection "c" (cosine, 2 dims) holding
// points 1..4.
func seeded(t *testing.T) (*qdranttest.Server, *qdrant.Client) {
	t.Helper()
	srv := qdranttest.Start(t)
	c := client(t, srv)
	if err := c.CreateCollection(t.Context(), &qdrant.CreateCollection{
		CollectionName: "c",
		VectorsConfig:  qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine}),
	}); err != nil {
		t.Fatalf("CreateCollection: %v", err)
	}
	pts := []*qdrant.PointStruct{
		{Id: qdrant.NewIDNum(1), Vectors: qdrant.NewVectors(3, 4), Payload: qdrant.NewValueMap(map[string]any{"t": "a", "n": 1, "tags": []any{"x", "y"}})},
		{Id: qdrant.NewIDNum(2), Vectors: qdrant.NewVectors(1, 0), Payload: qdrant.NewValueMap(map[string]any{"t": "a", "n": 5})},
		{Id: qdrant.NewIDNum(3), Vectors: qdrant.NewVectors(0, 1), Payload: qdrant.NewValueMap(map[string]any{"t": "b", "n": 0})},
		{Id: qdrant.NewIDNum(4), Vectors: qdrant.NewVectors(-1, 0), Payload: qdrant.NewValueMap(map[string]any{"t": "b"})},
	}
	if _, err := c.Upsert(t.Context(), &qdrant.UpsertPoints{CollectionName: "c", Wait: qdrant.PtrOf(true), Points: pts}); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	return srv, c
}

func ids(ps []*qdrant.ScoredPoint) []uint64 {
	var out []uint64
	for _, p := range ps {
		out = append(out, p.GetId().GetNum())
	}
	return out
}

func TestFilterSemantics(t *testing.T) {
	_, c := seeded(t)
	tests := []struct {
		name   string
		filter *qdrant.Filter
		want   []uint64
	}{
		{"nil", nil, []uint64{1, 2, 3, 4}},
		{"must keyword", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeyword("t", "a")}}, []uint64{1, 2}},
		{"keyword in list", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeyword("tags", "y")}}, []uint64{1}},
		{"must_not", &qdrant.Filter{MustNot: []*qdrant.Condition{qdrant.NewMatchKeyword("t", "a")}}, []uint64{3, 4}},
		{"should any", &qdrant.Filter{Should: []*qdrant.Condition{
			qdrant.NewMatchInt("n", 0), qdrant.NewRange("n", &qdrant.Range{Gt: qdrant.PtrOf(4.0)}),
		}}, []uint64{2, 3}},
		{"must and should", &qdrant.Filter{
			Must:   []*qdrant.Condition{qdrant.NewMatchKeyword("t", "a")},
			Should: []*qdrant.Condition{qdrant.NewRange("n", &qdrant.Range{Lte: qdrant.PtrOf(1.0)})},
		}, []uint64{1}},
		{"range on missing field", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewRange("n", &qdrant.Range{Gte: qdrant.PtrOf(-10.0)})}}, []uint64{1, 2, 3}},
		{"has_id", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewHasID(qdrant.NewIDNum(2), qdrant.NewIDNum(4))}}, []uint64{2, 4}},
		{"nested filter", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewFilterAsCondition(&qdrant.Filter{
			Should: []*qdrant.Condition{qdrant.NewMatchKeyword("t", "b"), qdrant.NewMatchInt("n", 1)},
		})}}, []uint64{1, 3, 4}},
		{"is_empty", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewIsEmpty("n")}}, []uint64{4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := c.Count(t.Context(), &qdrant.CountPoints{CollectionName: "c", Filter: tc.filter})
			if err != nil {
				t.Fatalf("Count: %v", err)
			}
			if got, want := n, uint64(len(tc.want)); got != want {
				t.Errorf("Count = %d, want %d", got, want)
			}
			res, err := c.Query(t.Context(), &qdrant.QueryPoints{
				CollectionName: "c", Query: qdrant.NewQuery(1, 1), Filter: tc.filter, Limit: qdrant.PtrOf(uint64(10)),
			})
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			got := ids(res)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Query ids = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUnsupportedFilters: a shape the fake does not evaluate must fail loudly,
// even when no point would be looked at.
func TestUnsupportedFilters(t *testing.T) {
	_, c := seeded(t)
	tests := []struct {
		name   string
		filter *qdrant.Filter
	}{
		{"min_should", &qdrant.Filter{MinShould: &qdrant.MinShould{Conditions: []*qdrant.Condition{qdrant.NewMatchKeyword("t", "a")}, MinCount: 1}}},
		{"text match", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchText("t", "a")}}},
		{"except", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchExcept("t", "a")}}},
		{"geo", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewGeoRadius("loc", 1, 2, 3)}}},
		{"values_count", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewValuesCount("tags", &qdrant.ValuesCount{Gt: qdrant.PtrOf(uint64(1))})}}},
		{"nested key", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeyword("a.b", "x")}}},
		{"nested object", &qdrant.Filter{MustNot: []*qdrant.Condition{qdrant.NewNestedFilter("arr", &qdrant.Filter{})}}},
		{"has_vector", &qdrant.Filter{Should: []*qdrant.Condition{qdrant.NewHasVector("v")}}},
		{"inside nested filter", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewFilterAsCondition(&qdrant.Filter{
			Must: []*qdrant.Condition{qdrant.NewMatchText("t", "a")},
		})}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Count(t.Context(), &qdrant.CountPoints{CollectionName: "c", Filter: tc.filter})
			if got, want := status.Code(err), codes.Unimplemented; got != want {
				t.Errorf("Count: code %v (%v), want %v", got, err, want)
			}
			_, err = c.Query(t.Context(), &qdrant.QueryPoints{CollectionName: "c", Query: qdrant.NewQuery(1, 0), Filter: tc.filter})
			if got, want := status.Code(err), codes.Unimplemented; got != want {
				t.Errorf("Query: code %v (%v), want %v", got, err, want)
			}
			_, err = c.Delete(t.Context(), &qdrant.DeletePoints{CollectionName: "c", Points: qdrant.NewPointsSelectorFilter(tc.filter)})
			if got, want := status.Code(err), codes.Unimplemented; got != want {
				t.Errorf("Delete: code %v (%v), want %v", got, err, want)
			}
		})
	}
	n, err := c.Count(t.Context(), &qdrant.CountPoints{CollectionName: "c"})
	if err != nil || n != 4 {
		t.Errorf("Count after rejected deletes = (%d, %v), want 4 points left", n, err)
	}
}

func TestQueryScoring(t *testing.T) {
	_, c := seeded(t)
	res, err := c.Query(t.Context(), &qdrant.QueryPoints{
		CollectionName: "c", Query: qdrant.NewQuery(2, 0), Limit: qdrant.PtrOf(uint64(10)),
		ScoreThreshold: qdrant.PtrOf(float32(-0.5)), WithPayload: qdrant.NewWithPayload(true),
	})
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	// Point 1 is (3,4): normalised (0.6,0.8); cosine with (1,0) is 0.6.
	wantIDs, wantScores := []uint64{2, 1, 3}, []float32{1, 0.6, 0}
	if got := ids(res); !slices.Equal(got, wantIDs) {
		t.Fatalf("ids = %v, want %v (best first, point 4 below the threshold)", got, wantIDs)
	}
	for i, p := range res {
		if math.Abs(float64(p.GetScore()-wantScores[i])) > 1e-6 {
			t.Errorf("score of %d = %v, want %v", p.GetId().GetNum(), p.GetScore(), wantScores[i])
		}
		if p.GetPayload()["t"] == nil {
			t.Errorf("point %d: payload missing with with_payload=true", p.GetId().GetNum())
		}
	}
	res, err = c.Query(t.Context(), &qdrant.QueryPoints{
		CollectionName: "c", Query: qdrant.NewQuery(1, 0), Limit: qdrant.PtrOf(uint64(1)), Offset: qdrant.PtrOf(uint64(1)),
	})
	if err != nil {
		t.Fatalf("Query with offset: %v", err)
	}
	if got, want := ids(res), []uint64{1}; !slices.Equal(got, want) {
		t.Errorf("limit 1 offset 1: ids = %v, want %v", got, want)
	}
	if len(res) == 1 && res[0].GetPayload() != nil {
		t.Errorf("payload returned without with_payload")
	}
}

func TestUpsertErrors(t *testing.T) {
	_, c := seeded(t)
	tests := []struct {
		name string
		req  *qdrant.UpsertPoints
		want codes.Code
	}{
		{"no collection", &qdrant.UpsertPoints{CollectionName: "nope", Points: []*qdrant.PointStruct{{Id: qdrant.NewIDNum(9), Vectors: qdrant.NewVectors(1, 0)}}}, codes.NotFound},
		{"wrong dimension", &qdrant.UpsertPoints{CollectionName: "c", Points: []*qdrant.PointStruct{
			{Id: qdrant.NewIDNum(9), Vectors: qdrant.NewVectors(1, 0)},
			{Id: qdrant.NewIDNum(10), Vectors: qdrant.NewVectors(1, 0, 0)},
		}}, codes.InvalidArgument},
		{"bad uuid", &qdrant.UpsertPoints{CollectionName: "c", Points: []*qdrant.PointStruct{{Id: qdrant.NewID("xyz"), Vectors: qdrant.NewVectors(1, 0)}}}, codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Upsert(t.Context(), tc.req)
			if got := status.Code(err); got != tc.want {
				t.Errorf("code %v (%v), want %v", got, err, tc.want)
			}
		})
	}
	// A rejected batch stores nothing, not even its valid points.
	n, err := c.Count(t.Context(), &qdrant.CountPoints{CollectionName: "c"})
	if err != nil || n != 4 {
		t.Errorf("Count = (%d, %v), want 4", n, err)
	}
}

func TestUUIDCanonical(t *testing.T) {
	srv, c := seeded(t)
	const upper = "0A1B2C3D4E5F60718293A4B5C6D7E8F9"
	if _, err := c.Upsert(t.Context(), &qdrant.UpsertPoints{CollectionName: "c", Points: []*qdrant.PointStruct{
		{Id: qdrant.NewID(upper), Vectors: qdrant.NewVectors(1, 1)},
	}}); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	got, err := c.Get(t.Context(), &qdrant.GetPoints{CollectionName: "c", Ids: []*qdrant.PointId{qdrant.NewID("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9")}})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("Get returned %d points, want 1", len(got))
	}
	if got, want := got[0].GetId().GetUuid(), "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"; got != want {
		t.Errorf("id = %q, want %q", got, want)
	}
	srv.Restart(t)
	// The client sees the old connection drop once, then reconnects.
	var n uint64
	deadline := time.Now().Add(5 * time.Second)
	for n, err = c.Count(t.Context(), &qdrant.CountPoints{CollectionName: "c"}); err != nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		n, err = c.Count(t.Context(), &qdrant.CountPoints{CollectionName: "c"})
	}
	if err != nil || n != 5 {
		t.Errorf("Count after restart = (%d, %v), want 5 (data kept)", n, err)
	}
}

// TestMaxPoints: past WithMaxPoints an upsert that adds points fails as a
// full Qdrant's would, and leaves the stored points as they were; replacing
// an existing point still works.
func TestMaxPoints(t *testing.T) {
	srv := qdranttest.Start(t, qdranttest.WithMaxPoints(2))
	c := client(t, srv)
	if err := c.CreateCollection(t.Context(), &qdrant.CreateCollection{
		CollectionName: "c",
		VectorsConfig:  qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine}),
	}); err != nil {
		t.Fatalf("CreateCollection: %v", err)
	}
	upsert := func(ids ...uint64) error {
		var pts []*qdrant.PointStruct
		for _, id := range ids {
			pts = append(pts, &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Vectors: qdrant.NewVectors(1, 0)})
		}
		_, err := c.Upsert(t.Context(), &qdrant.UpsertPoints{CollectionName: "c", Wait: qdrant.PtrOf(true), Points: pts})
		return err
	}
	if err := upsert(1, 2); err != nil {
		t.Fatalf("upsert within the bound: %v", err)
	}
	if err := upsert(2, 3); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("upsert past the bound: %v, want ResourceExhausted", err)
	}
	if got := srv.Points(); got != 2 {
		t.Errorf("points after the refused upsert = %d, want 2", got)
	}
	if err := upsert(1); err != nil {
		t.Errorf("replacing a stored point at the bound: %v", err)
	}
}
