package flow

import (
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

// The flow's unit tests run on the Chat Completions Format.
var chatFormat Format = openai.Chat
