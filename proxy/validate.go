package proxy

import (
	"golang.org/x/net/http/httpguts"

	"github.com/breakwater-dev/breakwater/lib/setting"
)

// Validate reports every problem of o's settings, each a *setting.Error
// naming its configuration key ([server], [cache], [stream]). A zero
// field is valid (its Default…, or what its comment says); a negative
// ReadHeaderTimeout is refused, and so is a MaxTemperature outside [0, 2]
// (the APIs' range) or a StaleThreshold outside [0, 1]. New calls it.
func (o Options) Validate() error {
	var es setting.Errors
	setting.Negative(&es, "server.read_header_timeout", o.ReadHeaderTimeout, "must be > 0")
	if o.EndUserHeader != "" && !httpguts.ValidHeaderFieldName(o.EndUserHeader) {
		es.Add("cache.end_user_header", o.EndUserHeader, `must be a header name such as X-End-User-ID ("" reads the identity from the body only)`)
	}
	setting.Outside(&es, "cache.max_temperature", o.MaxTemperature, 0, 2, "must be in [0, 2] (requests above it bypass the cache)")
	setting.Outside(&es, "cache.stale_threshold", o.StaleThreshold, 0, 1, "must be in (0, 1]")
	return es.Err()
}
