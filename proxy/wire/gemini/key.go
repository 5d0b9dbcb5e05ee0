package gemini

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// GeminiEndpoint is the path template GeminiKey hashes into the exact key:
// generateContent and streamGenerateContent share entries (as stream and
// non-stream Chat Completions do), and the model is hashed separately.
const GeminiEndpoint = "/v1beta/models/{model}:generateContent"

// geminiIgnored are top-level GenerateContentRequest fields that never change
// the answer: labels are billing metadata (Vertex AI).
var geminiIgnored = map[string]bool{"labels": true}

// GeminiKey builds the key of a Gemini generateContent request. model is the
// model named in the request path ("gemini-2.5-flash", without "models/"):
// the body does not carry it. stream says whether the path asked for
// streamGenerateContent. group maps the model to its cache group for the
// fingerprint, as in openai.ChatKey.
//
// Every field counts as sent: systemInstruction, the earlier contents,
// tools, toolConfig, safetySettings, cachedContent and the whole
// generationConfig (sampling, maxOutputTokens, stopSequences,
// responseMimeType, responseSchema, ...). Field names are matched exactly,
// never case-insensitively: the API reads "contents" and rejects "Contents",
// so the key must not read one and the upstream the other. The API also
// accepts the proto names (system_instruction, generation_config); both
// spellings are hashed as sent.
//
// Only the text parts of a final user turn are embedded (Query). A final
// turn with any other part (inlineData, fileData, functionResponse, ...), or
// a final turn that is not the user's, leaves Query empty: exact tier only.
func GeminiKey(partition, model string, stream bool, body []byte, group func(model string) string) (wire.Key, error) {
	obj, err := cache.DecodeObject(body)
	if err != nil {
		return wire.Key{}, err
	}
	if model == "" {
		return wire.Key{}, cache.BadRequest("the path must name a model: /v1beta/models/{model}:generateContent")
	}
	contents, ok := obj["contents"].([]any)
	if !ok || len(contents) == 0 {
		return wire.Key{}, cache.BadRequest(`field "contents" must be a non-empty array of Content objects`)
	}
	for i, c := range contents {
		co, ok := c.(map[string]any)
		if !ok {
			return wire.Key{}, cache.BadRequest(fmt.Sprintf("contents[%d] must be an object", i))
		}
		switch r := co["role"].(type) {
		case nil, string:
		default:
			return wire.Key{}, cache.BadRequest(fmt.Sprintf(`contents[%d].role must be a string, not %T`, i, r))
		}
		if p, ok := co["parts"]; ok {
			if _, ok := p.([]any); !ok {
				return wire.Key{}, cache.BadRequest(fmt.Sprintf(`contents[%d].parts must be an array of Part objects`, i))
			}
		}
	}
	k := wire.Key{Key: cache.Key{Partition: partition, Endpoint: GeminiEndpoint}, Model: model, Stream: stream}
	if k.Temperature, err = geminiTemperature(obj); err != nil {
		return wire.Key{}, err
	}

	req := withoutGeminiIgnored(obj)
	canon, err := cache.CanonicalValue(map[string]any{"model": model, "request": req})
	if err != nil {
		return wire.Key{}, err
	}
	k.Exact = cache.Digest("breakwater-exact-v1", []byte(partition), []byte(GeminiEndpoint), canon)

	fpModel := model
	if group != nil {
		if g := group(model); g != "" {
			fpModel = g
		}
	}
	last := contents[len(contents)-1].(map[string]any)
	if role, _ := last["role"].(string); role == "" || role == "user" {
		// A missing role is the user's: the API's default for single-turn
		// requests.
		if query, ok := geminiText(last); ok {
			k.Query = query
			rest := maps.Clone(last)
			delete(rest, "parts")
			fpContents := slices.Clone(contents)
			fpContents[len(fpContents)-1] = rest
			req["contents"] = fpContents
		}
	}
	if k.Fingerprint, err = cache.Fingerprint(GeminiEndpoint, map[string]any{"model": fpModel, "request": req}); err != nil {
		return wire.Key{}, err
	}
	return k, nil
}

// geminiText returns the text of a turn made only of text parts (each part
// exactly {"text": "..."}), joined with a newline. ok is false when the turn
// has any other part, or a part with more than its text (a thought, a
// signature, inline data beside the text): those are answered from the exact
// tier only.
func geminiText(content map[string]any) (string, bool) {
	parts, _ := content["parts"].([]any)
	if len(parts) == 0 {
		return "", false
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		po, ok := p.(map[string]any)
		if !ok || len(po) != 1 {
			return "", false
		}
		s, ok := po["text"].(string)
		if !ok {
			return "", false
		}
		texts = append(texts, s)
	}
	return strings.Join(texts, "\n"), true
}

// geminiTemperature reads generationConfig.temperature (or the proto
// spelling generation_config); nil when the request sets none (the model's
// default applies, 1.0 for current Gemini models).
func geminiTemperature(obj map[string]any) (*float64, error) {
	var found *float64
	for _, name := range []string{"generationConfig", "generation_config"} {
		gc, ok := obj[name]
		if !ok || gc == nil {
			continue
		}
		gco, ok := gc.(map[string]any)
		if !ok {
			return nil, cache.BadRequest(fmt.Sprintf("field %q must be an object", name))
		}
		t, ok := gco["temperature"]
		if !ok || t == nil {
			continue
		}
		n, ok := t.(json.Number)
		if !ok {
			return nil, cache.BadRequest(fmt.Sprintf("field %q must be a number", name+".temperature"))
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return nil, cache.BadRequest(fmt.Sprintf("field %q must be a number", name+".temperature"))
		}
		// Both spellings present: the higher temperature decides whether
		// the request bypasses the cache.
		if found == nil || f > *found {
			found = &f
		}
	}
	return found, nil
}

func withoutGeminiIgnored(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if !geminiIgnored[k] {
			out[k] = v
		}
	}
	return out
}
