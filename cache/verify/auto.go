package verify

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/breakwater-dev/breakwater/lib/judgeprompt"
)

// JudgeAuto is the judge that asks the model behind the request's own route.
const JudgeAuto = "auto"

// Asker sends one judge prompt (a system instruction and a user message) to
// the model of the request being looked up, through the request's own wire
// API, route, upstream and credentials, and returns the text of the reply.
// The proxy sets it on the lookup's context (WithAsker).
type Asker interface {
	Ask(ctx context.Context, system, user string) (string, error)
}

// AskerFunc is a function that is an Asker.
type AskerFunc func(ctx context.Context, system, user string) (string, error)

// Ask implements Asker.
func (f AskerFunc) Ask(ctx context.Context, system, user string) (string, error) {
	return f(ctx, system, user)
}

type askerKey struct{}

// WithAsker returns ctx carrying ask, for the Auto judge of this lookup.
func WithAsker(ctx context.Context, ask Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, ask)
}

// ErrNoAsker is the Auto judge's error for a lookup whose request cannot
// ask its model (no Asker on the context: an API without a judge request).
var ErrNoAsker = errors.New("the request's API cannot ask its model")

// Auto is the default judge: it asks the model the request itself is
// routed to, with the request's credentials, one fenced prompt per
// candidate (judgeprompt), and reads the verdict strictly. Candidates come
// from the requester's own partition (cache.Cache filters every candidate),
// and the call goes out with the requester's key, so no other tenant's key
// ever carries a question about this tenant's entries.
type Auto struct{}

// Name implements Judge.
func (Auto) Name() string { return JudgeAuto }

// Judge implements Judge: the candidates are asked concurrently (a lookup
// puts at most a few), and any failed or unparsable verdict fails them all.
func (Auto) Judge(ctx context.Context, query string, candidates []string) ([]bool, error) {
	ask, _ := ctx.Value(askerKey{}).(Asker)
	if ask == nil {
		return nil, ErrNoAsker
	}
	out := make([]bool, len(candidates))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range candidates {
		g.Go(func() error {
			sys, user := judgeprompt.Build(judgeprompt.NewNonce(), query, c)
			text, err := ask.Ask(gctx, sys, user)
			if err != nil {
				return fmt.Errorf("ask the model: %w", err)
			}
			out[i], err = judgeprompt.ParseVerdict(text)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
