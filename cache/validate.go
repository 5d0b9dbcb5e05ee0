package cache

import (
	"fmt"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/breakwater-dev/breakwater/lib/setting"
)

// Validate reports every problem of o's settings, each a *setting.Error
// naming its [cache] key. A zero field is valid (its Default…); a negative
// Threshold, TTL or QueueSize is refused (a negative QueueBytes is no
// limit).
func (o Options) Validate() error {
	var es setting.Errors
	setting.Outside(&es, "cache.threshold", o.Threshold, 0, 1, "must be in (0, 1]")
	setting.Negative(&es, "cache.ttl", o.TTL, "must be > 0")
	setting.Negative(&es, "cache.write_queue", o.QueueSize, "must be >= 1")
	return es.Err()
}

// ValidatePartitionBy reports every problem of a partition_by list (see
// NewPartitioner), each a *setting.Error naming its cache.partition_by
// item: a selector that is not lower-case "authorization", "namespace" or
// "header:<Name>" with Name an HTTP field name (RFC 9110 §5.1), or one
// that selects a header already selected.
func ValidatePartitionBy(by []string) error {
	var es setting.Errors
	seen := map[string]bool{}
	for i, sel := range by {
		key := fmt.Sprintf("cache.partition_by[%d]", i)
		name, err := partitionHeader(sel)
		if err != "" {
			es.Add(key, sel, "%s", err)
			continue
		}
		if seen[name] {
			es.Add(key, sel, "listed twice")
		}
		seen[name] = true
	}
	return es.Err()
}

// partitionHeader is the canonical name of the header sel selects, or
// what is wrong with sel.
func partitionHeader(sel string) (name, problem string) {
	switch {
	case sel == ByAuthorization:
		return "Authorization", ""
	case sel == ByNamespace:
		return NamespaceHeader, ""
	case strings.HasPrefix(sel, byHeaderPrefix):
		name := strings.TrimPrefix(sel, byHeaderPrefix)
		if !httpguts.ValidHeaderFieldName(name) {
			return "", `"header:" must be followed by a header name such as X-Tenant-ID`
		}
		return textproto.CanonicalMIMEHeaderKey(name), ""
	}
	return "", `must be "authorization", "namespace" or "header:<Name>" ([] shares one cache between all clients)`
}
