package qdranttest

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type pointsService struct {
	qdrant.UnimplementedPointsServer
	s *Server
}

func (s *Server) completed() *qdrant.PointsOperationResponse {
	s.opID++
	id := s.opID
	return &qdrant.PointsOperationResponse{Result: &qdrant.UpdateResult{OperationId: &id, Status: qdrant.UpdateStatus_Completed}}
}

func (ps *pointsService) CreateFieldIndex(_ context.Context, req *qdrant.CreateFieldIndexCollection) (*qdrant.PointsOperationResponse, error) {
	if req.GetFieldName() == "" {
		return nil, status.Error(codes.InvalidArgument, "Wrong input: field_name must not be empty")
	}
	s := ps.s
	c, unlock, err := s.lockCollection(req.GetCollectionName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	c.indexes[req.GetFieldName()] = req.GetFieldType()
	return s.completed(), nil
}

func (ps *pointsService) Upsert(_ context.Context, req *qdrant.UpsertPoints) (*qdrant.PointsOperationResponse, error) {
	if req.ShardKeySelector != nil || req.UpdateFilter != nil {
		return nil, unimplemented("upsert with shard_key_selector or update_filter")
	}
	if req.UpdateMode != nil && req.GetUpdateMode() != qdrant.UpdateMode_Upsert {
		return nil, unimplemented("update_mode %v", req.GetUpdateMode())
	}
	s := ps.s
	c, unlock, err := s.lockCollection(req.GetCollectionName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Validate the whole batch first: Qdrant applies a batch or rejects it.
	staged := make(map[string]*point, len(req.GetPoints()))
	for _, p := range req.GetPoints() {
		k, id, err := idKey(p.GetId())
		if err != nil {
			return nil, err
		}
		vec, err := c.denseVector(p.GetVectors())
		if err != nil {
			return nil, err
		}
		staged[k] = &point{id: id, vector: vec, payload: cloneMap(p.GetPayload())}
	}
	if s.maxPoints > 0 {
		added := 0
		for k := range staged {
			if _, ok := c.points[k]; !ok {
				added++
			}
		}
		if s.pointsLocked()+added > s.maxPoints {
			return nil, status.Errorf(codes.ResourceExhausted, "qdranttest: the server holds at most %d points (-max-points); the upsert would add %d to %d", s.maxPoints, added, s.pointsLocked())
		}
	}
	for k, p := range staged {
		c.points[k] = p
	}
	return s.completed(), nil
}

func (c *collection) denseVector(v *qdrant.Vectors) ([]float32, error) {
	vv, ok := v.GetVectorsOptions().(*qdrant.Vectors_Vector)
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "Wrong input: Not existing vector name error: only the unnamed vector exists")
	}
	var data []float32
	switch d := vv.Vector.GetVector().(type) {
	case *qdrant.Vector_Dense:
		data = d.Dense.GetData()
	case nil:
		// The deprecated flat form, which older clients still send; Qdrant
		// accepts it.
		//lint:ignore SA1019 accepted for compatibility, as Qdrant does
		if vv.Vector.Indices != nil || vv.Vector.VectorsCount != nil {
			return nil, unimplemented("sparse or multi vectors")
		}
		//lint:ignore SA1019 accepted for compatibility, as Qdrant does
		data = vv.Vector.GetData()
	default:
		return nil, unimplemented("vector %T", d)
	}
	return c.prepare(data)
}

// prepare checks the dimension and, for cosine, normalises the vector as
// Qdrant does on write and on query.
func (c *collection) prepare(data []float32) ([]float32, error) {
	if len(data) != c.dim {
		return nil, status.Errorf(codes.InvalidArgument, "Wrong input: Vector dimension error: expected dim: %d, got %d", c.dim, len(data))
	}
	out := slices.Clone(data)
	if c.distance == qdrant.Distance_Cosine {
		var sum float64
		for _, x := range out {
			sum += float64(x) * float64(x)
		}
		if sum > 0 {
			n := float32(math.Sqrt(sum))
			for i := range out {
				out[i] /= n
			}
		}
	}
	return out, nil
}

func (ps *pointsService) Get(_ context.Context, req *qdrant.GetPoints) (*qdrant.GetResponse, error) {
	if req.ShardKeySelector != nil {
		return nil, unimplemented("get with shard_key_selector")
	}
	s := ps.s
	c, unlock, err := s.lockCollection(req.GetCollectionName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	resp := &qdrant.GetResponse{}
	seen := map[string]bool{}
	for _, id := range req.GetIds() {
		k, _, err := idKey(id)
		if err != nil {
			return nil, err
		}
		p, ok := c.points[k]
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		payload, err := selectPayload(p, req.GetWithPayload(), true)
		if err != nil {
			return nil, err
		}
		vecs, err := selectVectors(p, req.GetWithVectors())
		if err != nil {
			return nil, err
		}
		resp.Result = append(resp.Result, &qdrant.RetrievedPoint{Id: p.id, Payload: payload, Vectors: vecs})
	}
	return resp, nil
}

func (ps *pointsService) Delete(_ context.Context, req *qdrant.DeletePoints) (*qdrant.PointsOperationResponse, error) {
	if req.ShardKeySelector != nil {
		return nil, unimplemented("delete with shard_key_selector")
	}
	s := ps.s
	c, unlock, err := s.lockCollection(req.GetCollectionName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	switch sel := req.GetPoints().GetPointsSelectorOneOf().(type) {
	case *qdrant.PointsSelector_Points:
		for _, id := range sel.Points.GetIds() {
			k, _, err := idKey(id)
			if err != nil {
				return nil, err
			}
			delete(c.points, k)
		}
	case *qdrant.PointsSelector_Filter:
		match, err := compileFilter(sel.Filter)
		if err != nil {
			return nil, err
		}
		for k, p := range c.points {
			if match(p) {
				delete(c.points, k)
			}
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "Wrong input: points selector is missing")
	}
	return s.completed(), nil
}

func (ps *pointsService) Count(_ context.Context, req *qdrant.CountPoints) (*qdrant.CountResponse, error) {
	if req.ShardKeySelector != nil {
		return nil, unimplemented("count with shard_key_selector")
	}
	match, err := compileFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	s := ps.s
	c, unlock, err := s.lockCollection(req.GetCollectionName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	var n uint64
	for _, p := range c.points {
		if match(p) {
			n++
		}
	}
	return &qdrant.CountResponse{Result: &qdrant.CountResult{Count: n}}, nil
}

func (ps *pointsService) Query(_ context.Context, req *qdrant.QueryPoints) (*qdrant.QueryResponse, error) {
	if len(req.GetPrefetch()) > 0 || req.ShardKeySelector != nil || req.LookupFrom != nil {
		return nil, unimplemented("query with prefetch, shard_key_selector or lookup_from")
	}
	if req.GetUsing() != "" {
		return nil, unimplemented("named vector %q", req.GetUsing())
	}
	near, ok := req.GetQuery().GetVariant().(*qdrant.Query_Nearest)
	if !ok {
		return nil, unimplemented("query %T (only nearest)", req.GetQuery().GetVariant())
	}
	dense, ok := near.Nearest.GetVariant().(*qdrant.VectorInput_Dense)
	if !ok {
		return nil, unimplemented("nearest %T (only a dense vector)", near.Nearest.GetVariant())
	}
	limit := uint64(10) // Qdrant's default
	if req.Limit != nil {
		limit = req.GetLimit()
	}
	if limit == 0 {
		return nil, status.Error(codes.InvalidArgument, "Validation error in body: limit: value 0 invalid, must be 1 or larger")
	}
	res, err := ps.s.search(req.GetCollectionName(), dense.Dense.GetData(), req.GetFilter(), req.ScoreThreshold,
		limit, req.GetOffset(), req.GetWithPayload(), req.GetWithVectors())
	if err != nil {
		return nil, err
	}
	return &qdrant.QueryResponse{Result: res}, nil
}

// Search is the older search API; the backend uses Query, but both are
// answered the same way.
func (ps *pointsService) Search(_ context.Context, req *qdrant.SearchPoints) (*qdrant.SearchResponse, error) {
	if req.ShardKeySelector != nil || req.SparseIndices != nil {
		return nil, unimplemented("search with shard_key_selector or sparse vectors")
	}
	if req.GetVectorName() != "" {
		return nil, unimplemented("named vector %q", req.GetVectorName())
	}
	if req.GetLimit() == 0 {
		return nil, status.Error(codes.InvalidArgument, "Validation error in body: limit: value 0 invalid, must be 1 or larger")
	}
	res, err := ps.s.search(req.GetCollectionName(), req.GetVector(), req.GetFilter(), req.ScoreThreshold,
		req.GetLimit(), req.GetOffset(), req.GetWithPayload(), req.GetWithVectors())
	if err != nil {
		return nil, err
	}
	return &qdrant.SearchResponse{Result: res}, nil
}

// search is an exact nearest-neighbour scan: filter, score, threshold, sort
// best first (ties by ID so results are stable), offset, limit.
func (s *Server) search(name string, vector []float32, f *qdrant.Filter, threshold *float32, limit, offset uint64,
	wp *qdrant.WithPayloadSelector, wv *qdrant.WithVectorsSelector) ([]*qdrant.ScoredPoint, error) {
	match, err := compileFilter(f)
	if err != nil {
		return nil, err
	}
	c, unlock, err := s.lockCollection(name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	q, err := c.prepare(vector)
	if err != nil {
		return nil, err
	}
	type hit struct {
		key   string
		p     *point
		score float32
	}
	var hits []hit
	for k, p := range c.points {
		if !match(p) {
			continue
		}
		var dot float32
		for i, x := range q {
			dot += x * p.vector[i]
		}
		if threshold != nil && dot < *threshold {
			continue
		}
		hits = append(hits, hit{k, p, dot})
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	if offset >= uint64(len(hits)) {
		return nil, nil
	}
	hits = hits[offset:]
	if uint64(len(hits)) > limit {
		hits = hits[:limit]
	}
	out := make([]*qdrant.ScoredPoint, 0, len(hits))
	for _, h := range hits {
		payload, err := selectPayload(h.p, wp, false)
		if err != nil {
			return nil, err
		}
		vecs, err := selectVectors(h.p, wv)
		if err != nil {
			return nil, err
		}
		out = append(out, &qdrant.ScoredPoint{Id: h.p.id, Payload: payload, Score: h.score, Vectors: vecs})
	}
	return out, nil
}

func selectPayload(p *point, sel *qdrant.WithPayloadSelector, def bool) (map[string]*qdrant.Value, error) {
	switch v := sel.GetSelectorOptions().(type) {
	case nil:
		if def {
			return cloneMap(p.payload), nil
		}
		return nil, nil
	case *qdrant.WithPayloadSelector_Enable:
		if v.Enable {
			return cloneMap(p.payload), nil
		}
		return nil, nil
	case *qdrant.WithPayloadSelector_Include:
		out := map[string]*qdrant.Value{}
		for _, k := range v.Include.GetFields() {
			if x, ok := p.payload[k]; ok {
				out[k] = x
			}
		}
		return cloneMap(out), nil
	case *qdrant.WithPayloadSelector_Exclude:
		out := cloneMap(p.payload)
		for _, k := range v.Exclude.GetFields() {
			delete(out, k)
		}
		return out, nil
	default:
		return nil, unimplemented("payload selector %T", v)
	}
}

func selectVectors(p *point, sel *qdrant.WithVectorsSelector) (*qdrant.VectorsOutput, error) {
	switch v := sel.GetSelectorOptions().(type) {
	case nil:
		return nil, nil
	case *qdrant.WithVectorsSelector_Enable:
		if !v.Enable {
			return nil, nil
		}
		return &qdrant.VectorsOutput{VectorsOptions: &qdrant.VectorsOutput_Vector{Vector: &qdrant.VectorOutput{
			Vector: &qdrant.VectorOutput_Dense{Dense: &qdrant.DenseVector{Data: slices.Clone(p.vector)}},
		}}}, nil
	default:
		return nil, unimplemented("vector selector %T", v)
	}
}
