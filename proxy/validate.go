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
	if o.ReadHeaderTimeout < 0 {
		es.Add("server.read_header_timeout", o.ReadHeaderTimeout, "must be > 0")
	}
	if o.EndUserHeader != "" && !httpguts.ValidHeaderFieldName(o.EndUserHeader) {
		es.Add("cache.end_user_header", o.EndUserHeader, `must be a header name such as X-End-User-ID ("" reads the identity from the body only)`)
	}
	if !(o.MaxTemperature >= 0 && o.MaxTemperature <= 2) {
		es.Add("cache.max_temperature", o.MaxTemperature, "must be in [0, 2] (requests above it bypass the cache)")
	}
	if !(o.StaleThreshold >= 0 && o.StaleThreshold <= 1) {
		es.Add("cache.stale_threshold", o.StaleThreshold, "must be in (0, 1]")
	}
	return es.Err()
}
