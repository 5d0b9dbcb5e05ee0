package qdrant

import (
	"context"
	"errors"
	"fmt"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/qdrant/go-client/qdrant"
)

// errIncompatible marks a collection that Breakwater cannot use for reasons
// other than dimension or embedder (named vectors, another distance).
var errIncompatible = errors.New("incompatible qdrant collection")

// payloadIndexes are created on every collection the index uses: the search
// filter and the sweep read these fields.
var payloadIndexes = []struct {
	field string
	typ   qdrant.FieldType
	want  qdrant.PayloadSchemaType
}{
	{"partition", qdrant.FieldType_FieldTypeKeyword, qdrant.PayloadSchemaType_Keyword},
	{"fingerprint", qdrant.FieldType_FieldTypeKeyword, qdrant.PayloadSchemaType_Keyword},
	{"expires", qdrant.FieldType_FieldTypeInteger, qdrant.PayloadSchemaType_Integer},
	// The flush and owner records (flushes.go, owners.go): with a keyword
	// index Qdrant plans the flush poll's filter by the index (a few
	// hundred points at most) and scores every match, instead of walking
	// the HNSW graph under a filter, where it could miss a record.
	{"kind", qdrant.FieldType_FieldTypeKeyword, qdrant.PayloadSchemaType_Keyword},
}

// setup creates the collection if it is missing, checks that an existing one
// was built for this dimension and embedder, and creates missing payload
// indexes. Every call has its own timeout.
func (ix *Index) setup(ctx context.Context) error {
	name := ix.opts.Collection
	info, err := ix.collectionInfo(ctx)
	if err != nil && !isNotFound(err) {
		return err
	}
	if info == nil {
		if err := ix.createCollection(ctx); err != nil {
			// Another replica may have created it between our check and create.
			var again error
			if info, again = ix.collectionInfo(ctx); again != nil {
				return err
			}
		} else if info, err = ix.collectionInfo(ctx); err != nil {
			return err
		}
	}
	if err := ix.checkCollection(ctx, info); err != nil {
		return err
	}
	for _, pi := range payloadIndexes {
		if s, ok := info.GetPayloadSchema()[pi.field]; ok && s.GetDataType() == pi.want {
			continue
		}
		cctx, cancel := ix.call(ctx)
		_, err := ix.points.CreateFieldIndex(cctx, &qdrant.CreateFieldIndexCollection{
			CollectionName: name,
			Wait:           qdrant.PtrOf(true),
			FieldName:      pi.field,
			FieldType:      pi.typ.Enum(),
		})
		cancel()
		if err != nil {
			return fmt.Errorf("create payload index %q on qdrant collection %q: %w", pi.field, name, err)
		}
	}
	return nil
}

// collectionInfo returns the collection's info, or (nil, err) with a NotFound
// status when it does not exist.
func (ix *Index) collectionInfo(ctx context.Context) (*qdrant.CollectionInfo, error) {
	cctx, cancel := ix.call(ctx)
	defer cancel()
	resp, err := ix.colls.Get(cctx, &qdrant.GetCollectionInfoRequest{CollectionName: ix.opts.Collection})
	if err != nil {
		return nil, fmt.Errorf("get qdrant collection %q: %w", ix.opts.Collection, err)
	}
	return resp.GetResult(), nil
}

func (ix *Index) createCollection(ctx context.Context) error {
	cctx, cancel := ix.call(ctx)
	defer cancel()
	_, err := ix.colls.Create(cctx, &qdrant.CreateCollection{
		CollectionName: ix.opts.Collection,
		VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{
			Size:     uint64(ix.opts.Dimension),
			Distance: qdrant.Distance_Cosine,
		}),
		Metadata: ix.metadata(),
	})
	if err != nil {
		return fmt.Errorf("create qdrant collection %q: %w", ix.opts.Collection, err)
	}
	ix.log.Info("created qdrant collection", "dimension", ix.opts.Dimension, "embedder", ix.opts.EmbedderName)
	return nil
}

func (ix *Index) metadata() map[string]*qdrant.Value {
	md := map[string]*qdrant.Value{
		metaEmbedder:  qdrant.NewValueString(ix.opts.EmbedderName),
		metaDimension: qdrant.NewValueInt(int64(ix.opts.Dimension)),
	}
	for k, v := range ix.settings() {
		md[k] = v
	}
	return md
}

// settings are the metadata every replica sharing the collection must
// agree on besides the embedder and dimension; none without
// Options.SecretFingerprint.
func (ix *Index) settings() map[string]*qdrant.Value {
	if ix.opts.SecretFingerprint == "" {
		return nil
	}
	return map[string]*qdrant.Value{
		metaSecret:   qdrant.NewValueString(ix.opts.SecretFingerprint),
		metaPortable: qdrant.NewValueBool(ix.opts.PortableVectors),
	}
}

// checkSettings refuses a collection whose recorded partition secret or
// portable_vectors differ from this process's, in one line naming the
// mismatch and the fix, and records the ones missing (a collection from
// before they were recorded).
func (ix *Index) checkSettings(ctx context.Context, md map[string]*qdrant.Value) error {
	name := ix.opts.Collection
	missing := map[string]*qdrant.Value{}
	for k, want := range ix.settings() {
		got, ok := md[k]
		if !ok {
			missing[k] = want
			continue
		}
		switch k {
		case metaSecret:
			if got.GetStringValue() != want.GetStringValue() {
				return fmt.Errorf("check qdrant collection %q: its replicas use another partition secret (fingerprint %s, this process %s), so tenants would not share entries; "+
					"give every replica the same secret through cache.partition_secret_env, or use another vector.qdrant.collection: %w",
					name, got.GetStringValue(), want.GetStringValue(), ErrSettingMismatch)
			}
		case metaPortable:
			if got.GetBoolValue() != want.GetBoolValue() {
				return fmt.Errorf("check qdrant collection %q: its replicas run with embed.portable_vectors = %v, this process with %v; "+
					"set the same embed.portable_vectors on every replica, or use another vector.qdrant.collection: %w",
					name, got.GetBoolValue(), want.GetBoolValue(), ErrSettingMismatch)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	cctx, cancel := ix.call(ctx)
	defer cancel()
	if _, err := ix.colls.Update(cctx, &qdrant.UpdateCollection{CollectionName: name, Metadata: missing}); err != nil {
		return fmt.Errorf("record the partition secret's fingerprint on qdrant collection %q: %w", name, err)
	}
	return nil
}

// checkCollection refuses a collection built for another dimension, distance
// or embedder, and adopts one that carries no embedder record.
func (ix *Index) checkCollection(ctx context.Context, info *qdrant.CollectionInfo) error {
	name := ix.opts.Collection
	params := info.GetConfig().GetParams().GetVectorsConfig().GetParams()
	if params == nil {
		return fmt.Errorf("check qdrant collection %q: it has named vectors, not one unnamed vector; "+
			"set vector.qdrant.collection to a collection Breakwater owns: %w", name, errIncompatible)
	}
	if got, want := int(params.GetSize()), ix.opts.Dimension; got != want {
		return fmt.Errorf("check qdrant collection %q: it holds %d-dimensional vectors but embedder %q makes %d; "+
			"use another vector.qdrant.collection for this embedder, or delete the collection to rebuild the cache: %w",
			name, got, ix.opts.EmbedderName, want, cache.ErrDimension)
	}
	if params.GetDistance() != qdrant.Distance_Cosine {
		return fmt.Errorf("check qdrant collection %q: it uses %v distance, Breakwater needs Cosine; "+
			"use another vector.qdrant.collection: %w", name, params.GetDistance(), errIncompatible)
	}
	md := info.GetConfig().GetMetadata()
	if v, ok := md[metaEmbedder]; ok {
		if got := v.GetStringValue(); got != ix.opts.EmbedderName {
			return fmt.Errorf("check qdrant collection %q: it was built by embedder %q, this process uses %q; "+
				"use another vector.qdrant.collection for this embedder, or delete the collection to rebuild the cache: %w",
				name, got, ix.opts.EmbedderName, cache.ErrEmbedderMismatch)
		}
		return ix.checkSettings(ctx, md)
	}
	// No record: a collection made by hand, or by an older Breakwater, or a
	// Qdrant older than 1.16 that drops collection metadata. Adopt it.
	cctx, cancel := ix.call(ctx)
	_, err := ix.colls.Update(cctx, &qdrant.UpdateCollection{CollectionName: name, Metadata: ix.metadata()})
	cancel()
	if err != nil {
		return fmt.Errorf("record embedder on qdrant collection %q: %w", name, err)
	}
	after, err := ix.collectionInfo(ctx)
	if err != nil {
		return err
	}
	if _, ok := after.GetConfig().GetMetadata()[metaEmbedder]; !ok {
		ix.log.Warn("qdrant does not keep collection metadata (older than 1.16?): only the dimension is checked, "+
			"a change of embedder with the same dimension will not be detected", "embedder", ix.opts.EmbedderName)
		return nil
	}
	ix.log.Warn("adopted qdrant collection without an embedder record; make sure its vectors come from this embedder",
		"embedder", ix.opts.EmbedderName, "points", info.GetPointsCount())
	return nil
}
