package embedded

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

const fuzzDim = 4

func fuzzOptions(dir string) Options {
	return Options{Path: dir, Dimension: fuzzDim, EmbedderName: "fuzz", FlatLimit: 4, SweepEvery: -1, SyncEvery: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// seedStore writes a real store (two buckets, one big enough for a graph)
// and returns its snapshot body (without the trailing CRC) and a log with
// upserts and deletes, for seeds.
func seedStore(f *testing.F) (snapshot, wal []byte) {
	f.Helper()
	dir := f.TempDir()
	x, err := Open(fuzzOptions(dir))
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	var items []cache.IndexItem
	for i := range 10 {
		part := "p1"
		if i%4 == 0 {
			part = "p2"
		}
		items = append(items, cache.IndexItem{
			Entry: cache.Entry{Key: fmt.Sprintf("k%d", i), Partition: part, Fingerprint: "fp", Query: fmt.Sprintf("q%d", i),
				Model: "m", Body: []byte(`{"choices":[]}`), Created: now, Expires: now.Add(time.Hour)},
			Vector: []float32{1, float32(i), 0.5, -float32(i)},
		})
	}
	if err := x.Upsert(f.Context(), items); err != nil {
		f.Fatal(err)
	}
	if err := x.DeletePartition(f.Context(), "p2"); err != nil {
		f.Fatal(err)
	}
	gens, err := walGens(dir)
	if err != nil || len(gens) == 0 {
		f.Fatalf("no log written: %v", err)
	}
	wal, err = os.ReadFile(filepath.Join(dir, walName(gens[len(gens)-1])))
	if err != nil {
		f.Fatal(err)
	}
	if err := x.Close(); err != nil {
		f.Fatal(err)
	}
	snap, err := os.ReadFile(filepath.Join(dir, snapshotName))
	if err != nil {
		f.Fatal(err)
	}
	return snap[:len(snap)-4], wal
}

// loadFuzzed decodes a snapshot and replays the logs under dir into a fresh
// state, as Open does: damaged files must be refused or repaired, never
// crash or allocate beyond what the file could describe.
func loadFuzzed(t *testing.T, dir string) {
	o, err := fuzzOptions(dir).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s := newState(o)
	if _, err := loadSnapshot(dir, s, o); err != nil {
		return
	}
	gens, _ := walGens(dir)
	for _, g := range gens {
		if _, err := replayWAL(filepath.Join(dir, walName(g)), o.Logger, func(p []byte) error { return s.apply(p, o) }); err != nil {
			return
		}
	}
	s.flush()
	s.evict(o)
}

// writeManifest gives dir the manifest a store of fuzzOptions has. The
// first call makes it the store's way (checkManifest); later ones copy its
// bytes without checkManifest's fsyncs, which on a slow disk held the
// fuzzers to a few inputs a second (and their minimiser to minutes).
func writeManifest(t *testing.T, dir string) {
	t.Helper()
	manifestOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "breakwater-fuzz-manifest-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		if err := checkManifest(tmp, fuzzOptions(tmp)); err != nil {
			t.Fatal(err)
		}
		manifestBytes, err = os.ReadFile(filepath.Join(tmp, manifestName))
		if err != nil {
			t.Fatal(err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, manifestName), manifestBytes, 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	manifestOnce  sync.Once
	manifestBytes []byte
)

// FuzzSnapshotReader feeds loadSnapshot arbitrary snapshot bodies with a
// valid checksum (so the decoder, not the CRC, is what gets exercised).
func FuzzSnapshotReader(f *testing.F) {
	snap, _ := seedStore(f)
	f.Add(snap)
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		writeManifest(t, dir)
		file := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
		if err := os.WriteFile(filepath.Join(dir, snapshotName), file, 0o644); err != nil {
			t.Fatal(err)
		}
		loadFuzzed(t, dir)
	})
}

// FuzzWALReader replays arbitrary logs. framed wraps the input as one record
// with a valid length and CRC, so the record decoder is reached; otherwise
// the raw bytes follow the magic (torn tails, bad lengths, bad CRCs).
func FuzzWALReader(f *testing.F) {
	_, wal := seedStore(f)
	f.Add(wal[len(walMagic):], false)
	if len(wal) > len(walMagic)+8 {
		n := binary.LittleEndian.Uint32(wal[len(walMagic):])
		f.Add(wal[len(walMagic)+8:len(walMagic)+8+int(n)], true)
	}
	f.Add([]byte{}, false)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, data []byte, framed bool) {
		dir := t.TempDir()
		writeManifest(t, dir)
		log := []byte(walMagic)
		if framed {
			log = binary.LittleEndian.AppendUint32(log, uint32(len(data)))
			log = binary.LittleEndian.AppendUint32(log, crc32.Checksum(data, castagnoli))
		}
		log = append(log, data...)
		path := filepath.Join(dir, walName(1))
		if err := os.WriteFile(path, log, 0o644); err != nil {
			t.Fatal(err)
		}
		loadFuzzed(t, dir)
		// Whatever was replayed, the log left behind is a clean sequence
		// of records: replaying it again truncates nothing.
		if fi, err := os.Stat(path); err == nil {
			before := fi.Size()
			n, err := replayWAL(path, slog.New(slog.DiscardHandler), func([]byte) error { return nil })
			if err == nil {
				if fi, _ := os.Stat(path); fi.Size() != before {
					t.Fatalf("second replay (%d records) truncated %d to %d bytes", n, before, fi.Size())
				}
			}
		}
	})
}
