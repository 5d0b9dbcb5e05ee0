package embedded

import "github.com/breakwater-dev/breakwater/lib/setting"

// Validate reports every problem of the bounds of o, each naming its
// [vector] key. A zero bound is valid (its Default…); a negative one is
// refused: the index is always bounded.
func (o Options) Validate() error {
	var es setting.Errors
	if o.MaxEntries < 0 {
		es.Add("vector.max_entries", o.MaxEntries, "must be > 0")
	}
	if o.MaxBytes < 0 {
		es.Add("vector.max_bytes", o.MaxBytes, "must be > 0")
	}
	if o.MaxEntryBytes < 0 {
		es.Add("vector.max_entry_bytes", o.MaxEntryBytes, "must be > 0")
	}
	return es.Err()
}
