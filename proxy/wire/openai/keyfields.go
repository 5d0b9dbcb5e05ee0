package openai

import (
	"encoding/json"
	"strconv"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// The fields of OpenAI-shaped request bodies that every API's key reads
// alike (model, temperature, stream, stream_options) and those that never
// change an answer: the key library's OpenAI knowledge, used by the key
// functions of the APIs whose bodies share these names (Chat Completions,
// completions, embeddings, Messages, Responses).

// ignoredFields are top-level request fields that never change the answer, so
// two requests that differ only in them share an entry. stream is here on
// purpose: a streamed and a non-streamed request share one entry, replayed as
// SSE or JSON by the proxy. safety_identifier and prompt_cache_key are the
// newer OpenAI spellings of "who is asking" and "how to route"; neither
// changes the completion.
var ignoredFields = map[string]bool{
	"stream":            true,
	"stream_options":    true,
	"user":              true,
	"metadata":          true,
	"store":             true,
	"service_tier":      true,
	"request_id":        true,
	"client_request_id": true,
	"x_request_id":      true,
	"safety_identifier": true,
	"prompt_cache_key":  true,
}

// Canonical returns the canonical JSON of an OpenAI request body: object keys
// sorted at every depth, no insignificant whitespace, numbers in one decimal
// form (1, 1.0 and 1e0 are the same), string content kept exactly, and the
// top-level fields that do not change the answer removed.
func Canonical(body []byte) ([]byte, error) {
	obj, err := cache.DecodeObject(body)
	if err != nil {
		return nil, err
	}
	return cache.CanonicalValue(withoutIgnored(obj))
}

// GenericKey builds the exact-only key of a request to an endpoint whose body
// names its model, such as OpenAI's /v1/completions or /v1/embeddings: it
// reads nothing beyond what CommonKey reads, so any API may use it for an
// endpoint without a semantic tier.
func GenericKey(partition, endpoint string, body []byte) (wire.Key, error) {
	obj, err := cache.DecodeObject(body)
	if err != nil {
		return wire.Key{}, err
	}
	return CommonKey(partition, endpoint, obj)
}

// CommonKey validates the fields every endpoint shares and computes Exact.
func CommonKey(partition, endpoint string, obj map[string]any) (wire.Key, error) {
	model, ok := obj["model"].(string)
	if !ok || model == "" {
		return wire.Key{}, cache.BadRequest(`field "model" must be a non-empty string`)
	}
	k := wire.Key{Key: cache.Key{Partition: partition, Endpoint: endpoint}, Model: model}
	switch t := obj["temperature"].(type) {
	case nil:
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return wire.Key{}, cache.BadRequest(`field "temperature" must be a number`)
		}
		k.Temperature = &f
	default:
		return wire.Key{}, cache.BadRequest(`field "temperature" must be a number`)
	}
	switch s := obj["stream"].(type) {
	case nil:
	case bool:
		k.Stream = s
	default:
		return wire.Key{}, cache.BadRequest(`field "stream" must be true or false`)
	}
	if so, ok := obj["stream_options"].(map[string]any); ok {
		k.IncludeUsage, _ = so["include_usage"].(bool)
	}
	canon, err := cache.CanonicalValue(withoutIgnored(obj))
	if err != nil {
		return wire.Key{}, err
	}
	k.Exact = cache.Digest("breakwater-exact-v1", []byte(partition), []byte(endpoint), canon)
	return k, nil
}

// withoutIgnored returns a shallow copy of obj without the ignored fields.
func withoutIgnored(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if !ignoredFields[k] {
			out[k] = v
		}
	}
	return out
}

// GroupFingerprint is obj without the fields that do not change the answer,
// its model replaced by the model's cache group when group names one.
func GroupFingerprint(obj map[string]any, model string, group func(model string) string) map[string]any {
	fp := withoutIgnored(obj)
	if group != nil {
		if g := group(model); g != "" {
			fp["model"] = g
		}
	}
	return fp
}
