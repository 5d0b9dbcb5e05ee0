package qdrant

import "github.com/breakwater-dev/breakwater/lib/setting"

// Validate reports every problem of o's settings, each a *setting.Error
// naming its [vector.qdrant] key. A zero Timeout is DefaultTimeout; a
// negative one is refused. Open calls it.
func (o Options) Validate() error {
	var es setting.Errors
	setting.Negative(&es, "vector.qdrant.timeout", o.Timeout, "must be > 0")
	return es.Err()
}
