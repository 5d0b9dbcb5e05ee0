// Package apis is the one list of the wire APIs Breakwater serves. Adding
// an API is its package beneath proxy/wire, exporting a wire.API, and one
// line here.
package apis

import (
	"github.com/breakwater-dev/breakwater/proxy/wire"
	"github.com/breakwater-dev/breakwater/proxy/wire/anthropic"
	"github.com/breakwater-dev/breakwater/proxy/wire/gemini"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
	"github.com/breakwater-dev/breakwater/proxy/wire/responses"
)

// All are the registered APIs, in the order the server mounts them (the
// first one without a Claims is the default API, whose error shape a
// request no API claims gets).
var All = []wire.API{
	openai.API,
	responses.API,
	anthropic.API,
	gemini.API,
}
