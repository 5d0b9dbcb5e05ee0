package lane

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

// MaxLanes bounds the per-key lanes of one target; when every lane is busy a
// new key shares the target's common lane.
const MaxLanes = 1024

// keyHeaders carry a client's API key: OpenAI's Authorization, Anthropic's
// x-api-key, Gemini's x-goog-api-key.
var keyHeaders = [...]string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"}

// Key is the lane of a request: a hash of the client's key when the key is
// forwarded (upstream limits are per key), "" when the sidecar holds the key
// (held). The key itself is never stored or logged.
func Key(h http.Header, held bool) string {
	if held {
		return ""
	}
	for _, name := range keyHeaders {
		if v := h.Get(name); v != "" {
			var buf [256]byte // keys fit; a longer one spills to the heap
			sum := sha256.Sum256(append(append(append(buf[:0], name...), 0), v...))
			var out [16]byte
			hex.Encode(out[:], sum[:8])
			return string(out[:])
		}
	}
	return ""
}

// Set is a target's admission state: one common lane, plus one per
// forwarded key, at most MaxLanes.
type Set struct {
	t                 Target
	ceiling, maxQueue int
	shared            *Lane
	seed              func() (float64, time.Duration) // Seed; nil: none

	mu  sync.Mutex
	per map[string]*Lane
}

// NewSet makes t's lanes, each as New makes it.
func NewSet(t Target, ceiling, maxQueue int) *Set {
	return &Set{t: t, ceiling: ceiling, maxQueue: maxQueue, shared: New(t, "", ceiling, maxQueue), per: make(map[string]*Lane)}
}

// Seed has every lane of the set, the common one and each forwarded key's,
// at its first use, ask f for the fleet's estimate (a limit, and a time per
// answer or 0) and start from it instead of its cold start, when the limit
// is above 0. Call it before the first request.
func (s *Set) Seed(f func() (float64, time.Duration)) { s.shared.seed, s.seed = f, f }

// For returns the lane of key (see Key), creating it when needed; an idle
// lane is evicted to make room when the target has MaxLanes, its limit and
// pace taken out of the target's sums.
func (s *Set) For(key string) *Lane {
	if key == "" {
		return s.shared
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.per[key]; ok {
		return l
	}
	if len(s.per) >= MaxLanes {
		now := time.Now()
		for k, l := range s.per {
			if l.Idle(now) {
				limit, pace, used := l.LimitState()
				if used {
					s.t.LimitMoved(-limit)
				}
				if pace != 0 {
					s.t.PaceMoved(-pace)
				}
				delete(s.per, k)
				break
			}
		}
		if len(s.per) >= MaxLanes {
			return s.shared
		}
	}
	l := New(s.t, key, s.ceiling, s.maxQueue)
	l.seed = s.seed
	s.per[key] = l
	return l
}

// Each calls f on every lane.
func (s *Set) Each(f func(*Lane)) {
	f(s.shared)
	s.mu.Lock()
	all := make([]*Lane, 0, len(s.per))
	for _, l := range s.per {
		all = append(all, l)
	}
	s.mu.Unlock()
	for _, l := range all {
		f(l)
	}
}
