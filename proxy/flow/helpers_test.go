package flow

import (
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

// The flow's unit tests run on the Chat Completions Format.
var (
	chatFormat Format = openai.Chat
	replay            = openai.Replay
)

func prepareWire(body []byte) *wireBody { return prepareStored(body, chatFormat) }

func wireOf(e *cache.Entry) *wireBody { return storedOf(e, chatFormat) }

func rewriteIdentity(body []byte, now time.Time) []byte { return chatFormat.Fresh(body, now) }

func renderSSE(body []byte, prefix string, includeUsage bool) (*sseRender, error) {
	return renderReplay(body, prefix, includeUsage, openai.Replay)
}
