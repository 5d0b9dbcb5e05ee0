package embedded

// DefaultMaxEntries bounds the number of entries when Options.MaxEntries is 0;
// the config package's vector.max_entries default refers to it.
const DefaultMaxEntries = 100_000
