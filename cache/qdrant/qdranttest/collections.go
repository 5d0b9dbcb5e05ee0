package qdranttest

import (
	"context"
	"fmt"
	"slices"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

type collection struct {
	name     string
	dim      int
	distance qdrant.Distance
	metadata map[string]*qdrant.Value
	indexes  map[string]qdrant.FieldType
	points   map[string]*point // by idKey
}

type point struct {
	id      *qdrant.PointId
	vector  []float32
	payload map[string]*qdrant.Value
}

type collectionsService struct {
	qdrant.UnimplementedCollectionsServer
	s *Server
}

// collection returns the named collection; the caller holds s.mu.
func (s *Server) collection(name string) (*collection, error) {
	c, ok := s.collections[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Not found: Collection `%s` doesn't exist!", name)
	}
	return c, nil
}

// lockCollection locks s and returns the collection named name and the
// unlock to defer; on an error s is unlocked already.
func (s *Server) lockCollection(name string) (*collection, func(), error) {
	s.mu.Lock()
	c, err := s.collection(name)
	if err != nil {
		s.mu.Unlock()
		return nil, nil, err
	}
	return c, s.mu.Unlock, nil
}

func (cs *collectionsService) Create(_ context.Context, req *qdrant.CreateCollection) (*qdrant.CollectionOperationResponse, error) {
	if req.GetCollectionName() == "" {
		return nil, status.Error(codes.InvalidArgument, "Validation error in body: collection_name: must not be empty")
	}
	if req.SparseVectorsConfig != nil || req.ShardingMethod != nil || req.QuantizationConfig != nil {
		return nil, status.Error(codes.Unimplemented, "qdranttest: sparse vectors, sharding and quantization are not implemented")
	}
	params := req.GetVectorsConfig().GetParams()
	if params == nil {
		return nil, status.Error(codes.Unimplemented, "qdranttest: only a single unnamed dense vector per point is implemented")
	}
	if params.GetSize() == 0 {
		return nil, status.Error(codes.InvalidArgument, "Validation error in body: vectors_config.size: value 0 invalid, must be 1 or larger")
	}
	switch params.GetDistance() {
	case qdrant.Distance_Cosine, qdrant.Distance_Dot:
	default:
		return nil, status.Errorf(codes.Unimplemented, "qdranttest: distance %v is not implemented", params.GetDistance())
	}
	if params.MultivectorConfig != nil || params.Datatype != nil {
		return nil, status.Error(codes.Unimplemented, "qdranttest: multivectors and vector datatypes are not implemented")
	}
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.collections[req.GetCollectionName()]; ok {
		return nil, status.Errorf(codes.InvalidArgument, "Wrong input: Collection `%s` already exists!", req.GetCollectionName())
	}
	s.collections[req.GetCollectionName()] = &collection{
		name:     req.GetCollectionName(),
		dim:      int(params.GetSize()),
		distance: params.GetDistance(),
		metadata: cloneMap(req.GetMetadata()),
		indexes:  map[string]qdrant.FieldType{},
		points:   map[string]*point{},
	}
	return &qdrant.CollectionOperationResponse{Result: true}, nil
}

func (cs *collectionsService) Get(_ context.Context, req *qdrant.GetCollectionInfoRequest) (*qdrant.GetCollectionInfoResponse, error) {
	s := cs.s
	c, unlock, err := s.lockCollection(req.GetCollectionName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	schema := map[string]*qdrant.PayloadSchemaInfo{}
	for field, ft := range c.indexes {
		schema[field] = &qdrant.PayloadSchemaInfo{DataType: schemaTypes[ft]}
	}
	n := uint64(len(c.points))
	return &qdrant.GetCollectionInfoResponse{Result: &qdrant.CollectionInfo{
		Status:          qdrant.CollectionStatus_Green,
		OptimizerStatus: &qdrant.OptimizerStatus{Ok: true},
		SegmentsCount:   1,
		Config: &qdrant.CollectionConfig{
			Params: &qdrant.CollectionParams{
				ShardNumber: 1,
				VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{
					Size:     uint64(c.dim),
					Distance: c.distance,
				}),
			},
			Metadata: cloneMap(c.metadata),
		},
		PayloadSchema:       schema,
		PointsCount:         &n,
		IndexedVectorsCount: &n,
	}}, nil
}

func (cs *collectionsService) List(context.Context, *qdrant.ListCollectionsRequest) (*qdrant.ListCollectionsResponse, error) {
	resp := &qdrant.ListCollectionsResponse{}
	for _, n := range cs.s.Collections() {
		resp.Collections = append(resp.Collections, &qdrant.CollectionDescription{Name: n})
	}
	return resp, nil
}

func (cs *collectionsService) CollectionExists(_ context.Context, req *qdrant.CollectionExistsRequest) (*qdrant.CollectionExistsResponse, error) {
	exists := slices.Contains(cs.s.Collections(), req.GetCollectionName())
	return &qdrant.CollectionExistsResponse{Result: &qdrant.CollectionExists{Exists: exists}}, nil
}

// Update implements only metadata changes: keys are merged into the
// collection's metadata, as Qdrant does.
func (cs *collectionsService) Update(_ context.Context, req *qdrant.UpdateCollection) (*qdrant.CollectionOperationResponse, error) {
	if req.OptimizersConfig != nil || req.Params != nil || req.HnswConfig != nil || req.VectorsConfig != nil ||
		req.QuantizationConfig != nil || req.SparseVectorsConfig != nil || req.StrictModeConfig != nil {
		return nil, status.Error(codes.Unimplemented, "qdranttest: only metadata updates are implemented")
	}
	s := cs.s
	c, unlock, err := s.lockCollection(req.GetCollectionName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if c.metadata == nil {
		c.metadata = map[string]*qdrant.Value{}
	}
	for k, v := range req.GetMetadata() {
		c.metadata[k] = proto.Clone(v).(*qdrant.Value)
	}
	return &qdrant.CollectionOperationResponse{Result: true}, nil
}

func (cs *collectionsService) Delete(_ context.Context, req *qdrant.DeleteCollection) (*qdrant.CollectionOperationResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.collections[req.GetCollectionName()]
	delete(s.collections, req.GetCollectionName())
	return &qdrant.CollectionOperationResponse{Result: ok}, nil
}

// schemaTypes are the payload schema types of the index field types; a
// type not listed is UnknownType, the zero value.
var schemaTypes = map[qdrant.FieldType]qdrant.PayloadSchemaType{
	qdrant.FieldType_FieldTypeKeyword:  qdrant.PayloadSchemaType_Keyword,
	qdrant.FieldType_FieldTypeInteger:  qdrant.PayloadSchemaType_Integer,
	qdrant.FieldType_FieldTypeFloat:    qdrant.PayloadSchemaType_Float,
	qdrant.FieldType_FieldTypeBool:     qdrant.PayloadSchemaType_Bool,
	qdrant.FieldType_FieldTypeDatetime: qdrant.PayloadSchemaType_Datetime,
	qdrant.FieldType_FieldTypeUuid:     qdrant.PayloadSchemaType_Uuid,
	qdrant.FieldType_FieldTypeText:     qdrant.PayloadSchemaType_Text,
	qdrant.FieldType_FieldTypeGeo:      qdrant.PayloadSchemaType_Geo,
}

func cloneMap(m map[string]*qdrant.Value) map[string]*qdrant.Value {
	if m == nil {
		return nil
	}
	out := make(map[string]*qdrant.Value, len(m))
	for k, v := range m {
		out[k] = proto.Clone(v).(*qdrant.Value)
	}
	return out
}

// idKey canonicalises a point ID: Qdrant accepts UUIDs in several spellings
// and always answers with the lowercase hyphenated form.
func idKey(id *qdrant.PointId) (string, *qdrant.PointId, error) {
	switch v := id.GetPointIdOptions().(type) {
	case *qdrant.PointId_Num:
		return fmt.Sprintf("n:%d", v.Num), qdrant.NewIDNum(v.Num), nil
	case *qdrant.PointId_Uuid:
		u, err := canonicalUUID(v.Uuid)
		if err != nil {
			return "", nil, err
		}
		return "u:" + u, qdrant.NewIDUUID(u), nil
	}
	return "", nil, status.Error(codes.InvalidArgument, "Wrong input: point id is missing")
}

func canonicalUUID(s string) (string, error) {
	hex := make([]byte, 0, 32)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-':
			continue
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			hex = append(hex, c)
		case c >= 'A' && c <= 'F':
			hex = append(hex, c+'a'-'A')
		default:
			return "", status.Errorf(codes.InvalidArgument, "Unable to parse UUID: %s", s)
		}
	}
	if len(hex) != 32 {
		return "", status.Errorf(codes.InvalidArgument, "Unable to parse UUID: %s", s)
	}
	h := string(hex)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
}
