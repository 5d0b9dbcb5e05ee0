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
//	breakwater demo -matrix [-short]            every peak scenario against its targets
//	breakwater help [COMMAND]                   this list, or one command's flags
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/breakwater-dev/breakwater/internal/app"
	"github.com/breakwater-dev/breakwater/internal/cmd/demo"
	"github.com/breakwater-dev/breakwater/internal/cmd/evalcmd"
	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"
	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
	"github.com/breakwater-dev/breakwater/lib/suggest"
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
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "breakwater:", err)
		os.Exit(1)
	}
}

// command is one sub-command: its name, the arguments it takes, one line
// saying what it does, and its entry point (args exclude the name).
type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands returns every sub-command in the order `breakwater help` lists
// them; serve reads the process environment through env and environ.
func commands(env func(string) string, environ []string) []command {
	return []command{
		{"serve", "[-config FILE] [-check]", "run the caching proxy (the default command; without -config it runs on built-in defaults and BREAKWATER_* variables)",
			func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return app.Main(ctx, args, stdout, stderr, env, environ)
			}},
		{"demo", "[-api openai|anthropic] [-matrix [-short]]", "see Breakwater absorb a peak in front of a simulated model, no keys needed (-matrix: every peak scenario against its targets)", demo.Run},
		{"sim", "[-listen ADDR]", "serve a simulated model endpoint (OpenAI, Anthropic and Gemini shapes) for trying things out", sim.Run},
		{"eval", "-pairs FILE.jsonl | -from-pairs FILE | -trace FILE", "measure the semantic tier's precision and recall, or replay a trace static vs verified", evalcmd.Run},
		{"calibrate", "-pairs FILE.jsonl", "pick the similarity threshold that meets a false-hit target", evalcmd.Calibrate},
		{"bench", "-url URL -rate N -duration D", "an open-loop load generator against any OpenAI-compatible URL", loadgen.Run},
		{"overhead", "-target NAME=URL ...", "measure the latency a proxy adds (closed loop, side by side)", loadgen.Overhead},
	}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// asksHelp reports whether a command's arguments ask for help anywhere
// among its flags (`sim -listen :9000 -h`), up to a "--".
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// run dispatches a command line: a sub-command by name, flags alone to
// serve, help to the list; anything else is an error, never a server.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string, environ []string) error {
	cmds := commands(env, environ)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]) {
		if asksHelp(args) {
			return commandHelp(ctx, cmds, "serve", stdout)
		}
		return cmds[0].run(ctx, args, stdout, stderr)
	}
	if isHelp(args[0]) {
		if len(args) > 1 {
			return commandHelp(ctx, cmds, args[1], stdout)
		}
		usage(stdout, cmds)
		return nil
	}
	for _, c := range cmds {
		if c.name != args[0] {
			continue
		}
		if asksHelp(args[1:]) || len(args) > 1 && args[1] == "-help" {
			return commandHelp(ctx, cmds, c.name, stdout)
		}
		return c.run(ctx, args[1:], stdout, stderr)
	}
	return unknown(cmds, args[0])
}

// usage lists every sub-command with one line each.
func usage(w io.Writer, cmds []command) {
	fmt.Fprint(w, "Breakwater is a semantic-caching sidecar for LLM endpoints (OpenAI, Anthropic, Gemini).\n\n")
	fmt.Fprint(w, "Usage: breakwater [COMMAND] [FLAGS]\n\nCommands:\n")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "  help       this list; `breakwater help COMMAND` (or COMMAND -h) shows a command's flags\n\n")
	fmt.Fprint(w, "With no command, breakwater serves: `breakwater -config FILE` is `breakwater serve -config FILE`.\n")
}

// commandHelp prints one command's usage line, summary and flags. The
// flags come from the command itself: run with -h, its flag set prints
// them and returns flag.ErrHelp.
func commandHelp(ctx context.Context, cmds []command, name string, w io.Writer) error {
	for _, c := range cmds {
		if c.name != name {
			continue
		}
		var flags bytes.Buffer
		err := c.run(ctx, []string{"-h"}, io.Discard, &flags)
		if !errors.Is(err, flag.ErrHelp) {
			return fmt.Errorf("%s -h: %v", name, err)
		}
		fmt.Fprintf(w, "Usage: breakwater %s %s\n\n%s\n\nFlags:\n", c.name, c.args, c.summary)
		// Drop the flag package's own "Usage of ...:" heading.
		text := flags.String()
		if first, rest, ok := strings.Cut(text, "\n"); ok && strings.HasPrefix(first, "Usage of ") {
			text = rest
		}
		fmt.Fprint(w, text)
		return nil
	}
	return unknown(cmds, name)
}

// unknown is the error for a command name that is not one, with the
// closest name when one is near (within two edits, or a prefix either way).
func unknown(cmds []command, name string) error {
	best, bestD := "", suggest.MaxEdits+1
	for _, c := range cmds {
		near := strings.HasPrefix(c.name, name) || strings.HasPrefix(name, c.name)
		if d := suggest.Distance(name, c.name); d < bestD || near && best == "" {
			best, bestD = c.name, d
		}
	}
	if best != "" {
		return fmt.Errorf("unknown command %q (did you mean %q?); run `breakwater help` for the list", name, best)
	}
	return fmt.Errorf("unknown command %q; run `breakwater help` for the list", name)
}
