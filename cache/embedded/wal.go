package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// The log ("wal-<generation as 16 hex digits>.log") is an 8-byte magic
// followed by records, each framed as
//
//	uint32 LE payload length | uint32 LE CRC-32C of payload | payload
//
// and written with one write(2) per record. A process killed mid-write
// leaves a torn tail: a short header, a short payload or a CRC mismatch.
// Replay stops at the first such record and truncates the file there, so the
// log never keeps garbage that later appends would sit behind. Bytes written
// before the kill are in the page cache and survive a process crash; only an
// OS crash or power loss can lose the records written since the last fsync
// (see Options.SyncEvery).

const walMagic = "BWWAL\x00\x00\x01"

// maxRecord bounds a record's length so that a corrupt length field cannot
// make replay allocate gigabytes.
const maxRecord = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func walName(gen uint64) string { return fmt.Sprintf("wal-%016x.log", gen) }

// walGens returns the generations of the logs in dir, ascending.
func walGens(dir string) ([]uint64, error) {
	names, err := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, n := range names {
		s := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(n), "wal-"), ".log")
		if g, err := strconv.ParseUint(s, 16, 64); err == nil && len(s) == 16 {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// wal is the open log being appended to. Appends are serialised by the
// Index's writeMu; sync may run concurrently with them.
type wal struct {
	gen    uint64
	f      *os.File
	size   int64
	broken error // set when a failed write could not be rolled back
	dirty  atomic.Bool
	buf    []byte
}

// createWAL creates an empty log of generation gen and makes its directory
// entry durable.
func createWAL(dir string, gen uint64) (*wal, error) {
	f, err := os.OpenFile(filepath.Join(dir, walName(gen)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	if _, err := f.Write([]byte(walMagic)); err != nil {
		f.Close()
		return nil, fmt.Errorf("write log header: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync log: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &wal{gen: gen, f: f, size: int64(len(walMagic))}, nil
}

// openWAL opens an existing, already replayed log for appending.
func openWAL(dir string, gen uint64) (*wal, error) {
	f, err := os.OpenFile(filepath.Join(dir, walName(gen)), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("seek log: %w", err)
	}
	return &wal{gen: gen, f: f, size: size}, nil
}

// append writes one record. On a failed write it truncates the file back so
// that the log stays a clean sequence of records.
func (w *wal) append(payload []byte, syncNow bool) error {
	if w.broken != nil {
		return fmt.Errorf("append log: earlier write failed: %w", w.broken)
	}
	w.buf = binary.LittleEndian.AppendUint32(w.buf[:0], uint32(len(payload)))
	w.buf = binary.LittleEndian.AppendUint32(w.buf, crc32.Checksum(payload, castagnoli))
	w.buf = append(w.buf, payload...)
	if _, err := w.f.WriteAt(w.buf, w.size); err != nil {
		if terr := w.f.Truncate(w.size); terr != nil {
			w.broken = err
		}
		return fmt.Errorf("append log: %w", err)
	}
	w.size += int64(len(w.buf))
	if cap(w.buf) > 1<<20 {
		w.buf = nil // do not pin one large batch's buffer
	}
	if syncNow {
		return w.sync()
	}
	w.dirty.Store(true)
	return nil
}

func (w *wal) sync() error {
	w.dirty.Store(false)
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync log: %w", err)
	}
	return nil
}

func (w *wal) close() error {
	serr := w.f.Sync()
	cerr := w.f.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("close log: %w", err)
	}
	return nil
}

// replayWAL calls apply for every intact record of the log at path, in
// order, and truncates a torn or corrupt tail. It returns the number of
// records applied.
func replayWAL(path string, logger *slog.Logger, apply func(payload []byte) error) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	if len(data) < len(walMagic) || string(data[:len(walMagic)]) != walMagic {
		if len(data) < len(walMagic) && string(data) == walMagic[:len(data)] {
			// Killed while creating the log: nothing was ever appended.
			return 0, rewriteHeader(path)
		}
		return 0, fmt.Errorf("read log %s: not a breakwater log (bad magic)", path)
	}
	off, n := len(walMagic), 0
	for off < len(data) {
		rest := data[off:]
		if len(rest) < 8 {
			break
		}
		length := binary.LittleEndian.Uint32(rest)
		sum := binary.LittleEndian.Uint32(rest[4:])
		// We never write an empty record: a zero length is a preallocated or
		// zero-filled tail (some filesystems show zeros after a crash).
		if length == 0 || length > maxRecord || uint64(len(rest)-8) < uint64(length) {
			break
		}
		payload := rest[8 : 8+length]
		if crc32.Checksum(payload, castagnoli) != sum {
			break
		}
		if err := apply(payload); err != nil {
			return n, fmt.Errorf("replay log %s at offset %d: %w", path, off, err)
		}
		off += 8 + int(length)
		n++
	}
	if off < len(data) {
		logger.Warn("truncating torn log tail", "path", path, "offset", off, "dropped_bytes", len(data)-off)
		if err := os.Truncate(path, int64(off)); err != nil {
			return n, fmt.Errorf("truncate log: %w", err)
		}
	}
	return n, nil
}

func rewriteHeader(path string) error {
	if err := os.WriteFile(path, []byte(walMagic), 0o644); err != nil {
		return fmt.Errorf("rewrite log header: %w", err)
	}
	return nil
}

// syncDir fsyncs a directory so that creates, renames and removes in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}
