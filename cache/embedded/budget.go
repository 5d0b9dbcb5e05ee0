package embedded

import "github.com/breakwater-dev/breakwater/cache"

// Defaults of the index's memory bounds.
const (
	// DefaultMaxBytes bounds the whole index, like the exact tier's budget.
	DefaultMaxBytes = 256 << 20
	// DefaultMaxEntryBytes bounds one entry: a prompt or an answer this
	// long is rare, and one of them would otherwise cost as much as
	// hundreds of ordinary entries.
	DefaultMaxEntryBytes = 1 << 20
)

// entryOverhead approximates the memory an entry costs besides its strings
// and vectors: the item, its map and heap slots, the bucket's slot (192
// bytes), and its graph links (160: level 0 holds 2M+1 int32 at the default
// M of 16, the levels above about a sixteenth of that).
const entryOverhead = 192 + 160

// itemBytes is what an entry counts against MaxBytes and MaxEntryBytes: its
// vector (float32), the half-precision copy a graph bucket keeps of it
// (counted for every entry, as any bucket may grow into a graph) and its
// payload, plus a fixed overhead. Measured heap per entry of a 1M-entry
// index of 512 dimensions is 3,864 bytes (docs/BENCHMARKS.md); this counts
// 3,424 plus the payload. Before the half copy and links were counted, a
// 256 MiB budget held about 390 MiB.
func itemBytes(e cache.Entry, dim int) int64 {
	return int64(len(e.Key)+len(e.Partition)+len(e.Fingerprint)+len(e.Query)+len(e.Model)+len(e.User)+len(e.Body)) +
		int64(dim)*(4+2) + entryOverhead
}
