package proxy

import (
	"net/http"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// builtinAPIs are the wire APIs still implemented in this package, mounted
// ahead of Options.APIs (issue 27 moves each to its package under
// proxy/wire and into proxy/wire/apis.All).
func builtinAPIs() []wire.API {
	return []wire.API{
		{Name: "openai", Errors: chatFormat, Routes: []wire.Route{
			{Method: http.MethodPost, Path: cache.ChatEndpoint, Format: chatFormat},
			{Method: http.MethodPost, Path: "/v1/completions", Format: completionsFormat},
			{Method: http.MethodPost, Path: "/v1/embeddings", Format: embeddingsFormat},
		}},
	}
}
