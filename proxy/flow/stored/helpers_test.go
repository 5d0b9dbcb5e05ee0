package stored

import (
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire/openai"
)

// The tests run on the Chat Completions Format.
var (
	chatFormat = openai.Chat
	replay     = openai.Replay
)

func prepareWire(body []byte) *Body { return prepare(body, chatFormat) }

func wireOf(e *cache.Entry) *Body { return Of(e, chatFormat) }

func rewriteIdentity(body []byte, now time.Time) []byte { return chatFormat.Fresh(body, now) }

func renderSSE(body []byte, prefix string, includeUsage bool) (*sseRender, error) {
	return renderReplay(body, prefix, includeUsage, openai.Replay)
}
