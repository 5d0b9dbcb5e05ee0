package verify

import "github.com/breakwater-dev/breakwater/lib/setting"

// Validate reports every problem of o, each naming its [cache.verify] key.
// A zero field is valid (its Default…); a negative one is refused, except
// SlotWait's (no wait).
func (o Options) Validate() error {
	var es setting.Errors
	if !(o.MinSimilarity >= 0 && o.MinSimilarity <= 1) {
		es.Add("cache.verify.min_similarity", o.MinSimilarity, "must be in (0, 1]")
	}
	if o.Candidates < 0 {
		es.Add("cache.verify.candidates", o.Candidates, "must be >= 1")
	}
	if o.Timeout < 0 {
		es.Add("cache.verify.timeout", o.Timeout, "must be > 0")
	}
	if o.Concurrency < 0 {
		es.Add("cache.verify.concurrency", o.Concurrency, "must be >= 1")
	}
	return es.Err()
}
