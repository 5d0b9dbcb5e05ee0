package cache

import (
	"context"
	"maps"
)

// Health returns the components (ComponentEmbedder, ComponentIndex) whose
// last operation failed, with that error. An empty map means every tier is
// healthy; an entry is cleared by the component's next success. While
// Options.OpenIndex runs, ComponentIndex is ErrIndexOpening (wrapped).
func (c *Cache) Health() map[string]error {
	c.healthMu.Lock()
	h := maps.Clone(c.health)
	c.healthMu.Unlock()
	c.openingHealth(h)
	return h
}

func (c *Cache) fail(component string, err error) {
	c.healthMu.Lock()
	c.health[component] = err
	c.healthMu.Unlock()
	c.log.Warn("cache tier degraded", "component", component, "err", err)
}

func (c *Cache) ok(component string) {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	if _, failing := c.health[component]; failing {
		delete(c.health, component)
		c.log.Info("cache tier recovered", "component", component)
	}
}

// Recheck retries each failing component with one cheap call (Len for the
// index, a short text for the embedder) and clears its failure on success,
// so an idle sidecar's readiness recovers when a backend comes back instead
// of waiting for the next request to try it.
func (c *Cache) Recheck(ctx context.Context) {
	h, index := c.Health(), c.ix()
	if h[ComponentIndex] != nil && index != nil {
		if _, err := index.Len(ctx); err == nil {
			c.ok(ComponentIndex)
		}
	}
	if h[ComponentEmbedder] != nil && c.embedder != nil {
		if _, err := c.embedder.Embed(ctx, []string{"readiness probe"}); err == nil {
			c.ok(ComponentEmbedder)
		}
	}
	if h[ComponentIndexWrites] != nil && index != nil {
		c.retryWrites(ctx)
	}
}
