package embedded

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/breakwater-dev/breakwater/cache"
)

// Files under Options.Path:
//
//	MANIFEST              JSON {"format":1,"embedder":…,"dimension":…}, written once
//	snapshot              state at the start of log generation G (format below)
//	wal-<G…>.log          records since then (wal.go), replayed in order
//	LOCK                  flock'd while open, so two processes never share a store
//
// Compaction (Index.compact) starts log G+1, writes snapshot.tmp for G+1,
// fsyncs it, renames it over snapshot, fsyncs the directory and only then
// removes older logs; a crash at any step leaves either the old snapshot
// with all its logs or the new one, never a half-written snapshot.
//
// Snapshot: magic "BWSNAP01", uvarint format, string embedder, uvarint dim,
// uvarint log generation, uvarint bucket count, then per bucket: strings
// partition and fingerprint, uvarint slot count, per slot a byte (0 free,
// 1 live, 2 live with its end user) and for a live slot entry (for 2, then
// user) and vector (codec.go); then a byte
// (0 no graph, 1 graph) and for a graph: varint entry, uvarint max level,
// per slot varint level (-1 absent) and per level uvarint count and that many
// uvarint links. The file ends with the CRC-32C of everything before it.
// snapload.go reads it back in one pass.

// maxGraphLevel bounds an HNSW level read from a snapshot: levels are
// int8 in memory, and with M >= 2 a level above 32 needs over 4 billion nodes.
const maxGraphLevel = 32

const (
	manifestName  = "MANIFEST"
	snapshotName  = "snapshot"
	snapMagic     = "BWSNAP01"
	formatVersion = 1
)

type manifest struct {
	Format    int    `json:"format"`
	Embedder  string `json:"embedder"`
	Dimension int    `json:"dimension"`
}

// checkManifest verifies that the store at dir was built for o, creating the
// manifest of a new store.
func checkManifest(dir string, o Options) error {
	path := filepath.Join(dir, manifestName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		m, _ := json.Marshal(manifest{Format: formatVersion, Embedder: o.EmbedderName, Dimension: o.Dimension})
		return writeFileAtomic(dir, manifestName, func(w io.Writer) error {
			_, err := w.Write(append(m, '\n'))
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("read manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("parse manifest %s: %w", path, err)
	}
	if m.Format != formatVersion {
		return fmt.Errorf("open vector store: %s has format %d, this build reads %d: point vector.path elsewhere or delete it", dir, m.Format, formatVersion)
	}
	return checkBuiltFor(dir, m.Embedder, m.Dimension, o)
}

func checkBuiltFor(dir, embedder string, dim int, o Options) error {
	var errs []error
	if embedder != o.EmbedderName {
		errs = append(errs, cache.ErrEmbedderMismatch)
	}
	if dim != o.Dimension {
		errs = append(errs, cache.ErrDimension)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("open vector store: store at %s was built by embedder %q (dim %d); this config uses %q (dim %d): point vector.path elsewhere or delete it: %w",
		dir, embedder, dim, o.EmbedderName, o.Dimension, errors.Join(errs...))
}

// writeFileAtomic writes dir/name through a temporary file: write, fsync,
// rename, fsync dir.
func writeFileAtomic(dir, name string, write func(io.Writer) error) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return syncDir(dir)
}

// writeSnapshot writes s as the snapshot for log generation gen.
func writeSnapshot(dir string, s *state, o Options, gen uint64) error {
	return writeFileAtomic(dir, snapshotName, func(w io.Writer) error {
		crc := crc32.New(castagnoli)
		mw := io.MultiWriter(w, crc)
		e := encoder{}
		e.b = append(e.b, snapMagic...)
		e.uvarint(formatVersion)
		e.str(o.EmbedderName)
		e.uvarint(uint64(o.Dimension))
		e.uvarint(gen)
		e.uvarint(uint64(len(s.buckets)))
		flush := func() error {
			_, err := mw.Write(e.b)
			e.b = e.b[:0]
			return err
		}
		for _, b := range s.buckets {
			e.str(b.key.partition)
			e.str(b.key.fingerprint)
			e.uvarint(uint64(len(b.items)))
			for slot, it := range b.items {
				if it == nil {
					e.byte(0)
					continue
				}
				if hasUser(&it.entry) {
					e.byte(2)
					e.entry(&it.entry)
					e.user(&it.entry)
				} else {
					e.byte(1)
					e.entry(&it.entry)
				}
				e.vector(b.vecs.at(int32(slot)))
				if len(e.b) > 1<<16 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			if b.g == nil {
				e.byte(0)
				continue
			}
			e.byte(1)
			e.b = binary.AppendVarint(e.b, int64(b.g.entry))
			e.uvarint(uint64(b.g.maxLevel))
			for slot := range b.items {
				if slot >= len(b.g.nodes) || b.g.levels[slot] < 0 {
					e.b = binary.AppendVarint(e.b, -1)
					continue
				}
				lv := int(b.g.levels[slot])
				e.b = binary.AppendVarint(e.b, int64(lv))
				for l := 0; l <= lv; l++ {
					links := b.g.links(int32(slot), l)
					e.uvarint(uint64(len(links)))
					for _, l := range links {
						e.uvarint(uint64(l))
					}
				}
				if len(e.b) > 1<<16 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		_, err := w.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
		return err
	})
}
