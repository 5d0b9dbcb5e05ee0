package responses

import (
	"fmt"
	"strings"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

// ResponsesEndpoint is the path of OpenAI's Responses API, hashed into the
// keys ResponsesKey builds.
const ResponsesEndpoint = "/v1/responses"

// responsesIgnored are the top-level fields of a Responses request that do
// not change the answer. Unlike Chat Completions, "store" is not here: a
// response created with store=false is unknown to the provider, so serving
// it to a request that stores would hand out an id that later fails as
// previous_response_id. "metadata" stays ignored as in openai.ChatKey: it labels the
// request for its owner, it does not shape the answer.
var responsesIgnored = map[string]bool{
	"stream":                 true,
	"stream_options":         true,
	"user":                   true,
	"metadata":               true,
	"service_tier":           true,
	"safety_identifier":      true,
	"prompt_cache_key":       true,
	"prompt_cache_retention": true,
	"request_id":             true,
	"client_request_id":      true,
	"x_request_id":           true,
}

// ResponsesKey builds the key of a POST /v1/responses request (OpenAI's
// Responses API). Every field that shapes the answer is part of both the
// exact key and the context fingerprint: model, instructions, the input items, tools, text.format,
// reasoning, include, store, and previous_response_id, so that a follow-up in
// one conversation is never answered from another's. The embedded query is
// the text of the final input item when that item is a user message made of
// text only (a string input counts as one); a final turn with images, files
// or audio, a tool output, or no input at all uses the exact tier only.
//
// Unlike openai.ChatKey there is no cache group: a response is served with the id
// its provider gave it, and that id only works as previous_response_id at
// the provider (and account) that created it. Models sharing a group may be
// served by different upstreams (the example config groups an OpenAI model
// with a local one), so sharing across models would hand out ids the next
// turn's provider does not know.
//
// Field names are matched exactly (the API is case-sensitive; encoding/json
// into a struct would not be), so the key reads the same fields the provider
// does.
func ResponsesKey(partition string, body []byte) (wire.Key, error) {
	obj, err := cache.DecodeObject(body)
	if err != nil {
		return wire.Key{}, err
	}
	k, err := openai.CommonKey(partition, ResponsesEndpoint, obj)
	if err != nil {
		return wire.Key{}, err
	}
	if err := checkResponsesFields(obj); err != nil {
		return wire.Key{}, err
	}
	canon := responsesCanonical(obj)
	exact, err := cache.CanonicalValue(canon)
	if err != nil {
		return wire.Key{}, err
	}
	k.Exact = cache.Digest("breakwater-exact-v1", []byte(partition), []byte(ResponsesEndpoint), exact)

	// The end user, as in openai.ChatKey: safety_identifier, else user.
	k.EndUser = cache.EndUserOf(obj, "safety_identifier", "user")
	fp := canon // canon is a fresh map; the fingerprint may change it
	query, rest, ok := responsesQuery(obj["input"])
	if ok {
		k.Query = query
		fp["input"] = rest
	}
	fpBytes, err := cache.CanonicalValue(fp)
	if err != nil {
		return wire.Key{}, err
	}
	// No partition here: the index filters on partition separately.
	k.Fingerprint = cache.Digest("breakwater-responses-fingerprint-v1", []byte(ResponsesEndpoint), fpBytes)
	return k, nil
}

// responsesCanonical is the part of a Responses request that shapes the
// answer, with the defaults the API applies written out where leaving them
// implicit would split one request into two keys.
func responsesCanonical(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj)+1)
	for name, v := range obj {
		if !responsesIgnored[name] {
			out[name] = v
		}
	}
	// store defaults to true in the API reference.
	if _, ok := out["store"]; !ok {
		out["store"] = true
	}
	if out["background"] == false {
		delete(out, "background")
	}
	return out
}

// checkResponsesFields rejects the shapes the API itself rejects, in the
// fields the key reads.
func checkResponsesFields(obj map[string]any) error {
	for _, name := range []string{"instructions", "previous_response_id"} {
		switch obj[name].(type) {
		case nil, string:
		default:
			return cache.BadRequest(fmt.Sprintf("field %q must be a string", name))
		}
	}
	switch obj["store"].(type) {
	case nil, bool:
	default:
		return cache.BadRequest(`field "store" must be true or false`)
	}
	switch in := obj["input"].(type) {
	case nil, string:
	case []any:
		for i, item := range in {
			io, ok := item.(map[string]any)
			if !ok {
				return cache.BadRequest(fmt.Sprintf("input[%d] must be an object", i))
			}
			if r, has := io["role"]; has {
				if _, ok := r.(string); !ok {
					return cache.BadRequest(fmt.Sprintf(`input[%d].role must be a string`, i))
				}
			}
		}
	default:
		return cache.BadRequest(`field "input" must be a string or an array of input items`)
	}
	return nil
}

// responsesQuery splits the text of the final user turn from the input. ok is
// false when the final input item is not a text-only user message: then the
// request is not eligible for the semantic tier. rest is the input with the
// final turn reduced to its role, so a string input, an easy message and a
// typed message with input_text parts leave the same context behind.
func responsesQuery(input any) (query string, rest []any, ok bool) {
	var items []any
	switch in := input.(type) {
	case string:
		if in == "" {
			return "", nil, false
		}
		return in, []any{map[string]any{"role": "user"}}, true
	case []any:
		items = in
	default:
		return "", nil, false
	}
	if len(items) == 0 {
		return "", nil, false
	}
	last, _ := items[len(items)-1].(map[string]any)
	if last["role"] != "user" {
		return "", nil, false
	}
	if t, has := last["type"]; has && t != "message" {
		return "", nil, false
	}
	// Only role, type and content: an item with an id, a status or anything
	// else is not a plain user turn.
	for name := range last {
		if name != "role" && name != "type" && name != "content" {
			return "", nil, false
		}
	}
	var text string
	switch c := last["content"].(type) {
	case string:
		text = c
	case []any:
		parts := make([]string, 0, len(c))
		for _, p := range c {
			po, _ := p.(map[string]any)
			if po["type"] != "input_text" || len(po) != 2 {
				// Images, files, audio: exact tier only.
				return "", nil, false
			}
			s, isStr := po["text"].(string)
			if !isStr {
				return "", nil, false
			}
			parts = append(parts, s)
		}
		text = strings.Join(parts, "\n")
	default:
		return "", nil, false
	}
	if text == "" {
		return "", nil, false
	}
	rest = make([]any, 0, len(items))
	rest = append(rest, items[:len(items)-1]...)
	rest = append(rest, map[string]any{"role": "user"})
	return text, rest, true
}
