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
	"slices"

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
// 1 live) and for a live slot entry and vector (codec.go); then a byte
// (0 no graph, 1 graph) and for a graph: varint entry, uvarint max level,
// per slot varint level (-1 absent) and per level uvarint count and that many
// uvarint links. The file ends with the CRC-32C of everything before it.

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
				e.byte(1)
				e.entry(&it.entry)
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

// verifyChecksum checks the trailing CRC-32C of the file at path.
func verifyChecksum(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < int64(len(snapMagic))+4 {
		return errors.New("file too short")
	}
	crc := crc32.New(castagnoli)
	if _, err := io.CopyN(crc, f, fi.Size()-4); err != nil {
		return err
	}
	var tail [4]byte
	if _, err := io.ReadFull(f, tail[:]); err != nil {
		return err
	}
	if crc.Sum32() != binary.LittleEndian.Uint32(tail[:]) {
		return errors.New("checksum mismatch")
	}
	return nil
}

// snapReader decodes a snapshot stream; the first error sticks.
type snapReader struct {
	r   *bufio.Reader
	err error
	buf []byte
}

func (r *snapReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *snapReader) uvarint() uint64 {
	v, err := binary.ReadUvarint(r.r)
	if err != nil {
		r.fail(err)
	}
	return v
}

func (r *snapReader) varint() int64 {
	v, err := binary.ReadVarint(r.r)
	if err != nil {
		r.fail(err)
	}
	return v
}

func (r *snapReader) byte() byte {
	c, err := r.r.ReadByte()
	if err != nil {
		r.fail(err)
	}
	return c
}

func (r *snapReader) full(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > maxRecord {
		r.fail(errors.New("length out of range"))
		return nil
	}
	r.buf = append(r.buf[:0], make([]byte, n)...)
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		r.fail(err)
		return nil
	}
	return r.buf
}

func (r *snapReader) str() string { return string(r.full(int(r.uvarint()))) }

// entryAndVector reads a live slot by decoding it with the log's decoder.
func (r *snapReader) entryAndVector(dim int) (cache.Entry, []float32) {
	var e encoder
	str := func() { e.str(r.str()) }
	for range 5 {
		str()
	}
	e.bytes(r.full(int(r.uvarint())))
	for range 2 {
		tag := r.byte()
		e.byte(tag)
		if tag == 1 {
			e.b = binary.AppendVarint(e.b, r.varint())
			e.uvarint(r.uvarint())
		}
	}
	if n := r.uvarint(); n != uint64(dim) {
		r.fail(fmt.Errorf("vector of %d dims in a store of %d: %w", n, dim, cache.ErrDimension))
	}
	e.uvarint(uint64(dim))
	e.b = append(e.b, r.full(4*dim)...)
	if r.err != nil {
		return cache.Entry{}, nil
	}
	d := decoder{b: e.b}
	en, v := d.entry(), d.vector(dim)
	r.fail(d.err)
	return en, v
}

// loadSnapshot reads the snapshot under dir into s and returns its log
// generation; (0, nil) when there is none.
func loadSnapshot(dir string, s *state, o Options) (uint64, error) {
	path := filepath.Join(dir, snapshotName)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open snapshot: %w", err)
	}
	defer f.Close()
	if err := verifyChecksum(path); err != nil {
		return 0, fmt.Errorf("verify snapshot %s: %w (the store is damaged: delete %s to start with an empty semantic cache)", path, err, dir)
	}
	r := &snapReader{r: bufio.NewReaderSize(f, 1<<20)}
	if string(r.full(len(snapMagic))) != snapMagic {
		return 0, fmt.Errorf("read snapshot %s: bad magic", path)
	}
	if v := r.uvarint(); v != formatVersion {
		return 0, fmt.Errorf("read snapshot %s: format %d, this build reads %d", path, v, formatVersion)
	}
	embedder, dim := r.str(), int(r.uvarint())
	if r.err == nil {
		if err := checkBuiltFor(dir, embedder, dim, o); err != nil {
			return 0, err
		}
	}
	gen := r.uvarint()
	nb := r.uvarint()
	for range nb {
		if r.err != nil {
			break
		}
		b := s.bucket(bucketKey{r.str(), r.str()})
		nslots := int(r.uvarint())
		for slot := 0; slot < nslots && r.err == nil; slot++ {
			b.items = append(b.items, nil)
			if r.byte() == 0 {
				b.free = append(b.free, int32(slot))
				continue
			}
			en, v := r.entryAndVector(dim)
			if r.err != nil {
				break
			}
			s.seq++
			it := &item{entry: en, b: b, slot: int32(slot), seq: s.seq}
			b.vecs.set(int32(slot), v)
			b.items[slot] = it
			b.live++
			s.byKey[en.Key] = it
			s.age.push(it)
			s.bytes += itemBytes(en, s.dim)
		}
		if r.byte() == 1 {
			g := newGraph(&b.vecs, s.m, s.efC)
			g.entry, g.maxLevel = int32(r.varint()), int(r.uvarint())
			if g.entry < 0 || int(g.entry) >= nslots {
				r.fail(fmt.Errorf("graph entry %d out of range", g.entry))
			}
			g.nodes = make([]node, nslots)
			g.levels = make([]int8, nslots)
			// Layer-0 lists go to the graph's inline array once their
			// longest is known (see graph.links0): read them into one
			// buffer first.
			var l0buf []int32
			l0 := make([][2]int, nslots) // start and end in l0buf
			for slot := 0; slot < nslots && r.err == nil; slot++ {
				lv := r.varint()
				g.levels[slot] = int8(lv)
				if lv < 0 {
					continue
				}
				if lv > 0 {
					g.nodes[slot].upper = make([][]int32, lv)
				}
				for l := 0; l <= int(lv); l++ {
					n := int(r.uvarint())
					if n > nslots {
						r.fail(fmt.Errorf("graph list of %d links in %d slots", n, nslots))
						break
					}
					start := len(l0buf)
					l0buf = slices.Grow(l0buf, n)
					for range n {
						x := int32(r.uvarint())
						if int(x) >= nslots {
							r.fail(fmt.Errorf("graph link %d out of range", x))
						}
						l0buf = append(l0buf, x)
					}
					if l == 0 {
						l0[slot] = [2]int{start, len(l0buf)}
						g.stride0 = max(g.stride0, n+1)
						continue
					}
					links := make([]int32, n, max(n, g.maxLinks(l)))
					copy(links, l0buf[start:])
					l0buf = l0buf[:start]
					g.nodes[slot].upper[l-1] = links
				}
			}
			g.grow(nslots)
			for slot, se := range l0 {
				g.setLinks(int32(slot), 0, l0buf[se[0]:se[1]])
			}
			b.g = g
		}
		if b.live == 0 {
			delete(s.buckets, b.key)
		}
		// A snapshot written under a larger budget is cut down bucket by
		// bucket, so loading it holds at most one bucket beyond the budget.
		s.evict(o)
	}
	if r.err != nil {
		return 0, fmt.Errorf("read snapshot %s: %w", path, r.err)
	}
	return gen, nil
}
