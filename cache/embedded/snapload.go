package embedded

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	"github.com/breakwater-dev/breakwater/cache"
)

// Loading a snapshot (the format is described in snapshot.go) is one
// sequential pass over the file: the CRC-32C is computed as the bytes are
// decoded, each vector is read straight into its slot of the bucket's
// vector chunks (the file's little-endian float32 is the memory layout on
// little-endian machines), layer-0 links straight into the graph's inline
// array, and an entry's partition and fingerprint share the bucket's
// strings. Decoding every slot through the log's record decoder, as the
// first version did, cost ~12 allocations and four copies of the vector
// per entry: 21 s for 100k entries on a busy machine.

// maxModels bounds the model names interned while loading one snapshot.
const maxModels = 256

// littleEndian: vectors can be read from the file as they lie in memory.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

var errTruncated = errors.New("unexpected end of snapshot")

// snapReader decodes a snapshot stream; the first error sticks.
type snapReader struct {
	r   *bufio.Reader
	err error
	// size is the file's size: no length or count read from the file may
	// exceed it, so a damaged (or crafted) count fails instead of
	// allocating gigabytes before the read runs out.
	size   int64
	big    []byte // a string longer than the read buffer
	kq     []byte // key then query of the entry being read
	models map[string]string
	built  error // the store was built for another embedder or dimension
	lim    *io.LimitedReader
}

// remaining is how many bytes of the body are left to decode.
func (r *snapReader) remaining() int64 { return r.lim.N + int64(r.r.Buffered()) }

func (r *snapReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// count reads a uvarint count of items each at least one byte long.
func (r *snapReader) count(what string) int {
	n := r.uvarint()
	if n > uint64(r.size) {
		r.fail(fmt.Errorf("%s %d in a file of %d bytes", what, n, r.size))
		return 0
	}
	return int(n)
}

func (r *snapReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	p, _ := r.r.Peek(binary.MaxVarintLen64)
	v, n := binary.Uvarint(p)
	if n <= 0 {
		if n == 0 {
			r.fail(errTruncated)
		} else {
			r.fail(errors.New("varint overflows 64 bits"))
		}
		return 0
	}
	r.r.Discard(n)
	return v
}

func (r *snapReader) varint() int64 {
	ux := r.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (r *snapReader) byte() byte {
	if r.err != nil {
		return 0
	}
	c, err := r.r.ReadByte()
	if err != nil {
		r.fail(errTruncated)
	}
	return c
}

// next returns the next n bytes, valid until the following read.
func (r *snapReader) next(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > maxRecord || n > uint64(r.size) {
		r.fail(fmt.Errorf("length %d out of range", n))
		return nil
	}
	if int(n) <= r.r.Size() {
		p, err := r.r.Peek(int(n))
		if err != nil {
			r.fail(errTruncated)
			return nil
		}
		r.r.Discard(int(n))
		return p
	}
	r.big = slices.Grow(r.big[:0], int(n))[:n]
	r.readFull(r.big)
	return r.big
}

func (r *snapReader) readFull(p []byte) {
	if r.err != nil {
		return
	}
	if _, err := io.ReadFull(r.r, p); err != nil {
		r.fail(errTruncated)
	}
}

func (r *snapReader) str() string { return string(r.next(r.uvarint())) }

// same reads a string and reports whether it equals want.
func (r *snapReader) same(want string) bool { return string(r.next(r.uvarint())) == want }

func (r *snapReader) model() string {
	p := r.next(r.uvarint())
	if m, ok := r.models[string(p)]; ok {
		return m
	}
	m := string(p)
	if len(r.models) < maxModels {
		r.models[m] = m
	}
	return m
}

func (r *snapReader) time() time.Time { return readTime(r) }

// entry reads a live slot's entry (codec.go's layout) of bucket k.
func (r *snapReader) entry(k bucketKey) cache.Entry {
	// Key and query share one allocation: they live and die together.
	r.kq = append(r.kq[:0], r.next(r.uvarint())...)
	nk := len(r.kq)
	if !r.same(k.partition) || !r.same(k.fingerprint) {
		r.fail(fmt.Errorf("entry of another partition or fingerprint in bucket %q", k.partition))
	}
	r.kq = append(r.kq, r.next(r.uvarint())...)
	model := r.model()
	var body []byte
	if n := r.uvarint(); n > 0 {
		body = append([]byte(nil), r.next(n)...)
	} else {
		body = []byte{}
	}
	created := r.time()
	expires := r.time()
	kq := string(r.kq)
	return cache.Entry{Key: kq[:nk], Partition: k.partition, Fingerprint: k.fingerprint, Query: kq[nk:], Model: model,
		Body: body, Created: created, Expires: expires}
}

// vector reads a dim-long vector into dst.
func (r *snapReader) vector(dst []float32) {
	if n := r.uvarint(); n != uint64(len(dst)) && r.err == nil {
		r.fail(fmt.Errorf("vector of %d dims in a store of %d: %w", n, len(dst), cache.ErrDimension))
	}
	if r.err != nil || len(dst) == 0 {
		return
	}
	if littleEndian {
		r.readFull(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)))
		return
	}
	p := r.next(uint64(4 * len(dst)))
	if r.err == nil {
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		}
	}
}

// loadSnapshot reads the snapshot under dir into s and returns its log
// generation; (0, nil) when there is none. s is left partly filled on an
// error.
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
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("open snapshot: %w", err)
	}
	damaged := func(err error) error {
		return fmt.Errorf("verify snapshot %s: %w (the store is damaged: delete %s to start with an empty semantic cache)", path, err, dir)
	}
	size := fi.Size()
	if size < int64(len(snapMagic))+4 {
		return 0, damaged(errors.New("file too short"))
	}
	crc := crc32.New(castagnoli)
	lim := &io.LimitedReader{R: f, N: size - 4}
	r := &snapReader{
		r:      bufio.NewReaderSize(io.TeeReader(lim, crc), int(min(size, 1<<20))),
		lim:    lim,
		size:   size,
		models: make(map[string]string),
	}
	gen, derr := r.snapshot(dir, s, o)
	// The checksum covers the whole body: read what decoding left, so a
	// damaged file is reported as damaged whatever the decoder made of it.
	if _, err := io.Copy(io.Discard, r.r); err != nil {
		return 0, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	var tail [4]byte
	if _, err := io.ReadFull(f, tail[:]); err != nil {
		return 0, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	if crc.Sum32() != binary.LittleEndian.Uint32(tail[:]) {
		return 0, damaged(errors.New("checksum mismatch"))
	}
	if r.built != nil {
		return 0, r.built
	}
	if derr != nil {
		return 0, fmt.Errorf("read snapshot %s: %w", path, derr)
	}
	return gen, nil
}

// snapshot decodes the body of a snapshot into s.
func (r *snapReader) snapshot(dir string, s *state, o Options) (uint64, error) {
	if string(r.next(uint64(len(snapMagic)))) != snapMagic {
		return 0, errors.New("bad magic")
	}
	if v := r.uvarint(); v != formatVersion {
		return 0, fmt.Errorf("format %d, this build reads %d", v, formatVersion)
	}
	embedder, dim := r.str(), int(r.uvarint())
	if r.err != nil {
		return 0, r.err
	}
	if err := checkBuiltFor(dir, embedder, dim, o); err != nil {
		r.built = err
		return 0, err
	}
	gen := r.uvarint()
	// Every live entry holds 4·dim bytes of vector in the file: size the
	// key map and the age heap once instead of growing them step by step.
	if len(s.byKey) == 0 {
		hint := int(min(r.size/int64(4*max(dim, 1)+8), int64(o.MaxEntries)))
		s.byKey = make(map[string]*item, hint)
		s.age = slices.Grow(s.age, hint)
	}
	nb := r.count("bucket count")
	seen := make(map[bucketKey]bool)
	for range nb {
		k := bucketKey{r.str(), r.str()}
		if r.err != nil {
			break
		}
		if seen[k] {
			r.fail(fmt.Errorf("bucket %q listed twice", k.partition))
			break
		}
		seen[k] = true
		r.bucket(s, s.bucket(k))
		if b := s.buckets[k]; b != nil && b.live == 0 {
			delete(s.buckets, k)
		}
		// A snapshot written under a larger budget is cut down bucket by
		// bucket, so loading it holds at most one bucket beyond the budget.
		s.evict(o)
	}
	return gen, r.err
}

// bucket reads one bucket's slots and graph into b.
func (r *snapReader) bucket(s *state, b *bucket) {
	nslots := r.count("slot count")
	// Each slot takes at least a byte of the file, so nslots is bounded by
	// what is left of it; the items grow as slots are actually read.
	b.items = make([]*item, 0, min(nslots, 1<<16))
	// Each live slot carries 4·dim bytes of vector: allocate the chunks of
	// as many slots as the rest of the file can hold at once (chunkSlab);
	// vecStore.slot adds single chunks beyond.
	if len(b.vecs.chunks) == 0 && b.vecs.dim > 0 {
		fit := min(int64(nslots), r.remaining()/int64(4*b.vecs.dim))
		b.vecs.chunks = chunkSlab[float32](int((fit+(1<<chunkShift)-1)>>chunkShift), (1<<chunkShift)*b.vecs.dim)
	}
	for slot := 0; slot < nslots && r.err == nil; slot++ {
		b.items = append(b.items, nil)
		tag := r.byte()
		switch tag {
		case 0:
			b.free = append(b.free, int32(slot))
			continue
		case 1, 2:
		default:
			r.fail(errors.New("bad slot tag"))
			return
		}
		en := r.entry(b.key)
		if tag == 2 {
			en.User = r.str()
			en.Agreed = r.byte() == 1
		}
		v := b.vecs.slot(int32(slot))
		r.vector(v)
		if r.err != nil {
			return
		}
		if b.vecs.withHalf {
			b.vecs.set(int32(slot), v)
		}
		if s.byKey[en.Key] != nil {
			r.fail(fmt.Errorf("key %q stored twice", en.Key))
			return
		}
		s.seq++
		it := &item{entry: en, b: b, slot: int32(slot), seq: s.seq}
		b.items[slot] = it
		b.live++
		s.byKey[en.Key] = it
		s.age.push(it)
		s.bytes += itemBytes(en, s.dim)
	}
	if r.err != nil || r.byte() != 1 {
		return
	}
	b.g = r.graph(&b.vecs, s.m, s.efC, nslots)
}

// graph reads a bucket's graph over nslots slots (all already read, so
// nslots is bounded by the file's content).
func (r *snapReader) graph(vecs *vecStore, m, efC, nslots int) *graph {
	g := newGraph(vecs, m, efC)
	entry, maxLevel := r.varint(), r.uvarint()
	if entry < 0 || entry >= int64(nslots) {
		r.fail(fmt.Errorf("graph entry %d out of range", entry))
		return nil
	}
	if maxLevel > maxGraphLevel {
		r.fail(fmt.Errorf("graph level %d out of range", maxLevel))
		return nil
	}
	g.entry, g.maxLevel = int32(entry), int(maxLevel)
	g.nodes = make([]node, nslots)
	g.levels = make([]int8, nslots)
	g.links0 = make([]int32, nslots*g.stride0)
	longest := 0 // longest layer-0 list
	for slot := 0; slot < nslots && r.err == nil; slot++ {
		lv := r.varint()
		if lv > int64(g.maxLevel) || lv < -1 {
			r.fail(fmt.Errorf("graph level %d out of range", lv))
			break
		}
		g.levels[slot] = int8(lv)
		if lv < 0 {
			continue
		}
		if lv > 0 {
			g.nodes[slot].upper = make([][]int32, lv)
		}
		for l := 0; l <= int(lv) && r.err == nil; l++ {
			n := r.uvarint()
			if n > uint64(nslots) {
				r.fail(fmt.Errorf("graph list of %d links in %d slots", n, nslots))
				break
			}
			var links []int32
			if l == 0 {
				longest = max(longest, int(n))
				if int(n) >= g.stride0 {
					// Written under a larger M: widen every record, so the
					// list loads whole (later changes prune it).
					g.restride(max(int(n)+1, 2*g.stride0))
				}
				base := slot * g.stride0
				g.links0[base] = int32(n)
				links = g.links0[base+1 : base+1+int(n)]
			} else {
				links = make([]int32, n, max(int(n), g.m))
				g.nodes[slot].upper[l-1] = links
			}
			for i := range int(n) {
				v := r.uvarint()
				if v >= uint64(nslots) {
					r.fail(fmt.Errorf("graph link %d out of range", v))
					break
				}
				links[i] = int32(v)
			}
		}
	}
	if r.err != nil {
		return nil
	}
	// A search starts at entry on maxLevel and reads its links there.
	if int(g.levels[entry]) != g.maxLevel {
		r.fail(fmt.Errorf("graph entry %d is not on the top level %d", entry, g.maxLevel))
		return nil
	}
	if want := max(g.m0, longest) + 1; g.stride0 > want {
		g.restride(want)
	}
	return g
}

// restride moves every layer-0 record to a stride of n int32 (at least the
// longest list plus its count).
func (g *graph) restride(n int) {
	slots := len(g.links0) / g.stride0
	out := make([]int32, slots*n)
	for i := range slots {
		rec := g.links0[i*g.stride0 : (i+1)*g.stride0]
		copy(out[i*n:], rec[:1+rec[0]])
	}
	g.links0, g.stride0 = out, n
}

// slot returns slot i's vector memory, growing the chunks to hold it.
func (s *vecStore) slot(i int32) []float32 {
	for int(i>>chunkShift) >= len(s.chunks) {
		s.chunks = append(s.chunks, make([]float32, (1<<chunkShift)*s.dim))
	}
	return s.at(i)
}
