// Command breakwater is a semantic-caching sidecar for LLM endpoints that
// speak OpenAI's Chat Completions, completions, embeddings and Responses,
// Anthropic's Messages or Google's Gemini generateContent: it answers repeats and paraphrases from its cache and sends
// only true misses to the model, through a caller that backs off, falls back
// and sheds load cleanly.
//
// Usage:
//
//	breakwater [serve] [-config FILE] [-check]  serve (the default command)
//	breakwater eval -pairs FILE.jsonl           measure precision/recall of the semantic tier
//	breakwater eval -from-pairs FILE | -trace FILE   replay a trace: static vs verified hits
//	breakwater calibrate -pairs FILE            pick a threshold for a false-hit target
//	breakwater sim -listen ADDR                 a simulated model endpoint
//	breakwater bench -url URL -rate N -duration D   an open-loop load generator
//	breakwater overhead -target NAME=URL ...     latency a proxy adds (closed loop)
//	breakwater demo                             see Breakwater absorb a peak, no keys needed
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/breakwater-dev/breakwater/internal/app"
	"github.com/breakwater-dev/breakwater/internal/cmd/demo"
	"github.com/breakwater-dev/breakwater/internal/cmd/evalcmd"
	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"
	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal forces exit.
		<-ctx.Done()
		stop()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		fmt.Fprintln(os.Stderr, "breakwater: second signal, exiting now")
		os.Exit(2)
	}()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "breakwater:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "eval":
			return evalcmd.Run(ctx, args[1:], os.Stdout, os.Stderr)
		case "calibrate":
			return evalcmd.Calibrate(ctx, args[1:], os.Stdout, os.Stderr)
		case "sim":
			return sim.Run(ctx, args[1:], os.Stdout, os.Stderr)
		case "bench":
			return loadgen.Run(ctx, args[1:], os.Stdout, os.Stderr)
		case "overhead":
			return loadgen.Overhead(ctx, args[1:], os.Stdout, os.Stderr)
		case "demo":
			return demo.Run(ctx, args[1:], os.Stdout, os.Stderr)
		case "serve":
			args = args[1:]
		}
	}
	return app.Main(ctx, args, os.Stdout, os.Stderr, os.Getenv, os.Environ())
}
