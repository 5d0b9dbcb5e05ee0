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
// and vector: the item, its map and heap slots, the bucket's slot.
const entryOverhead = 192

// itemBytes is what an entry counts against MaxBytes and MaxEntryBytes: its
// vector (float32) and payload plus a fixed overhead.
func itemBytes(e cache.Entry, dim int) int64 {
	return int64(len(e.Key)+len(e.Partition)+len(e.Fingerprint)+len(e.Query)+len(e.Model)+len(e.Body)) +
		int64(dim)*4 + entryOverhead
}
