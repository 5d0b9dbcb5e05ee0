package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/breakwater-dev/breakwater/config"
)

// Main is the serve command: flags, config, logger, listen, serve until ctx
// ends, shut down in order. env looks variables up; environ lists them
// ("NAME=value", as os.Environ gives them) so that BREAKWATER_ variables the
// config does not read can be reported.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string, environ []string) error {
	fs := flag.NewFlagSet("breakwater", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "TOML config file (default: built-in defaults; the upstream comes from "+config.UpstreamURLEnv+")")
	check := fs.Bool("check", false, "check the config and the environment as start-up does (keys that api_key_env names, the data folder, the listen address), list every problem, and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve takes flags only, not %q; run `breakwater help` for the commands", fs.Arg(0))
	}
	// Start-up refuses what -check reports, all of it at once: invalid
	// settings and what the environment lacks.
	cfg, err := config.LoadWithProblems(*path, env)
	if cfg == nil {
		return err
	}
	err = errors.Join(err, cfg.CheckEnvironment(env))
	unknown := cfg.UnknownEnv(environ)
	if *check {
		for _, w := range unknown {
			fmt.Fprintln(stderr, "warning:", w)
		}
		if err != nil {
			return err
		}
		if b := cfg.BudgetScope(); b != "" {
			fmt.Fprintln(stdout, "budgets:", b)
		}
		fmt.Fprintln(stdout, "config ok")
		return nil
	}
	if err != nil {
		return err
	}
	// The log is buffered off the request path (logbuffer.go) and flushed
	// when Main returns.
	lb := newLogBuffer(stderr)
	defer lb.Close()
	log := NewLogger(lb, cfg.Server.LogLevel, cfg.Server.LogFormat)
	for _, w := range unknown {
		log.Warn(w)
	}
	a, err := New(ctx, cfg, Options{Logger: log, Env: env})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		a.Shutdown(context.Background())
		return fmt.Errorf("config: server.listen = %q: %w", cfg.Server.Listen, err)
	}
	return a.Serve(ctx, ln)
}

// NewLogger builds the process logger: JSON by default (production), text
// for people at a terminal.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: l, ReplaceAttr: durationMS}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationMS logs every duration attribute in milliseconds with the unit in
// its name ("wait_ms":51.07, not "wait":51069661 nanoseconds in JSON).
func durationMS(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	ms := float64(a.Value.Duration().Microseconds()) / 1000
	return slog.Float64(a.Key+"_ms", ms)
}
