package openai

import (
	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// ChatEndpoint is the path ChatKey hashes into the exact key.
const ChatEndpoint = "/v1/chat/completions"

// ChatKey builds the key of a /v1/chat/completions request, with the end
// user it names (Key.EndUser). group maps a
// model to its cache group for the fingerprint, so that models sharing a
// group share semantic entries; nil (or a result of "") uses the model
// itself.
func ChatKey(partition string, body []byte, group func(model string) string) (wire.Key, error) {
	obj, err := cache.DecodeObject(body)
	if err != nil {
		return wire.Key{}, err
	}
	k, err := CommonKey(partition, ChatEndpoint, obj)
	if err != nil {
		return wire.Key{}, err
	}
	msgs, err := cache.MessagesOf(obj)
	if err != nil {
		return wire.Key{}, err
	}

	// The end user: safety_identifier, which OpenAI's API reference says
	// replaces user for this purpose, else user. Neither is in the key.
	k.EndUser = cache.EndUserOf(obj, "safety_identifier", "user")
	fp := GroupFingerprint(obj, k.Model, group)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] == "user" {
		query, rest, err := cache.SplitUserContent(len(msgs)-1, last["content"])
		if err != nil {
			return wire.Key{}, err
		}
		k.Query = query
		fp["messages"] = cache.WithLastContent(msgs, rest)
	}
	if k.Fingerprint, err = cache.Fingerprint(ChatEndpoint, fp); err != nil {
		return wire.Key{}, err
	}
	return k, nil
}
