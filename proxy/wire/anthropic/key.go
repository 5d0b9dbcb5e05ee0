package anthropic

import (
	"strings"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

// MessagesEndpoint is the path MessagesKey hashes into the exact key.
const MessagesEndpoint = "/v1/messages"

// MessagesKey builds the key of an Anthropic Messages request (POST
// /v1/messages). The exact key and the context fingerprint cover the model
// (its cache group for the fingerprint), system (string or blocks), the
// earlier turns, tools, tool_choice, sampling parameters, stop_sequences and
// thinking; metadata and stream do not count, nor do cache_control markers
// (prompt caching changes the price of an answer, not the answer). headers
// are request headers that shape the answer (anthropic-version and
// anthropic-beta): they are hashed in as they were sent.
//
// The embedded text (Query) is the text blocks of the final user turn. A
// final turn that carries anything else (images, documents, tool results) or
// a final assistant turn (a prefill) leaves Query empty: exact tier only.
func MessagesKey(partition string, body []byte, group func(model string) string, headers map[string]string) (wire.Key, error) {
	obj, err := cache.DecodeObject(body)
	if err != nil {
		return wire.Key{}, err
	}
	if _, err := cache.MessagesOf(obj); err != nil {
		return wire.Key{}, err
	}
	obj = withoutCacheControl(obj)
	for name, v := range headers {
		// Header names hold '-', which no body field of the API has.
		obj[strings.ToLower(name)] = v
	}
	k, err := openai.CommonKey(partition, MessagesEndpoint, obj)
	if err != nil {
		return wire.Key{}, err
	}
	// The end user: metadata.user_id ("an external identifier for the user
	// who is associated with the request", Anthropic's API reference).
	if md, ok := obj["metadata"].(map[string]any); ok {
		k.EndUser = cache.EndUserOf(md, "user_id")
	}
	msgs := obj["messages"].([]any)
	fp := openai.GroupFingerprint(obj, k.Model, group)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] == "user" {
		query, rest, err := cache.SplitUserContent(len(msgs)-1, last["content"])
		if err != nil {
			return wire.Key{}, err
		}
		if len(rest) == 0 {
			k.Query = query
			fp["messages"] = cache.WithLastContent(msgs, nil)
		}
	}
	if k.Fingerprint, err = cache.Fingerprint(MessagesEndpoint, fp); err != nil {
		return wire.Key{}, err
	}
	return k, nil
}

// withoutCacheControl returns a copy of a Messages request without the
// cache_control markers where the API accepts them: top level, system
// blocks, message content blocks and tools.
func withoutCacheControl(obj map[string]any) map[string]any {
	out := without(obj, "cache_control")
	if sys, ok := out["system"].([]any); ok {
		out["system"] = blocksWithout(sys)
	}
	if tools, ok := out["tools"].([]any); ok {
		out["tools"] = blocksWithout(tools)
	}
	if msgs, ok := out["messages"].([]any); ok {
		cp := make([]any, len(msgs))
		for i, m := range msgs {
			mo := m.(map[string]any)
			if content, ok := mo["content"].([]any); ok {
				mo = without(mo, "")
				mo["content"] = blocksWithout(content)
			}
			cp[i] = mo
		}
		out["messages"] = cp
	}
	return out
}

// blocksWithout copies a list of objects without their cache_control.
func blocksWithout(list []any) []any {
	out := make([]any, len(list))
	for i, b := range list {
		if bo, ok := b.(map[string]any); ok {
			out[i] = without(bo, "cache_control")
		} else {
			out[i] = b
		}
	}
	return out
}

// without is a shallow copy of m without the member name.
func without(m map[string]any, name string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != name {
			out[k] = v
		}
	}
	return out
}
