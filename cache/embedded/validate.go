package embedded

import "github.com/breakwater-dev/breakwater/lib/setting"

// Validate reports every problem of the bounds of o, each naming its
// [vector] key. A zero bound is valid (its Default…); a negative one is
// refused: the index is always bounded.
func (o Options) Validate() error {
	var es setting.Errors
	setting.Negative(&es, "vector.max_entries", o.MaxEntries, "must be > 0")
	setting.Negative(&es, "vector.max_bytes", o.MaxBytes, "must be > 0")
	setting.Negative(&es, "vector.max_entry_bytes", o.MaxEntryBytes, "must be > 0")
	return es.Err()
}
