package verify

import "github.com/breakwater-dev/breakwater/lib/setting"

// Validate reports every problem of o, each naming its [cache.verify] key.
// A zero field is valid (its Default…); a negative one is refused, except
// SlotWait's (no wait).
func (o Options) Validate() error {
	var es setting.Errors
	setting.Outside(&es, "cache.verify.min_similarity", o.MinSimilarity, 0, 1, "must be in (0, 1]")
	setting.Negative(&es, "cache.verify.candidates", o.Candidates, "must be >= 1")
	setting.Negative(&es, "cache.verify.timeout", o.Timeout, "must be > 0")
	setting.Negative(&es, "cache.verify.concurrency", o.Concurrency, "must be >= 1")
	return es.Err()
}
