// Package embed turns text into L2-normalised vectors for the semantic tier.
package embed

import (
	"context"
	"errors"
)

// Embedder turns texts into vectors. Implementations return one vector per
// input text, in input order, each of length Dimension() and L2-normalised.
// They must be safe for concurrent use.
type Embedder interface {
	// Embed returns one vector per text. An empty slice of texts returns an
	// empty slice and no error. A vector that cannot be produced is an error,
	// never a zero vector.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimension is the length of every vector Embed returns.
	Dimension() int
	// Name identifies the model and its version (for example
	// "builtin:use-lite-en@0.2.0"); a vector index built with one name must
	// not be searched with vectors from another.
	Name() string
}

// Truncator is implemented by embedders that only see a prefix of long texts.
// The cache uses it so that two long texts sharing that prefix (and so a
// vector) are not taken for each other.
type Truncator interface {
	// Truncated reports whether text is longer than what the embedder sees.
	Truncated(text string) bool
}

// Coverer is implemented by embedders that can tell whether their vector of
// a text stands for all of it. The cache gives a text that is not covered
// exact hits only: what the encoder cannot see cannot make two texts match
// (issue 42: a payload in a script the built-in encoder has no vocabulary
// for cost the vector almost nothing).
type Coverer interface {
	// Covers reports whether every part of text reaches the vector: nothing
	// outside the embedder's vocabulary and nothing truncated.
	Covers(text string) bool
}

// ErrInvalidText is returned (wrapped) for text that cannot be embedded, such
// as invalid UTF-8.
var ErrInvalidText = errors.New("invalid text")
