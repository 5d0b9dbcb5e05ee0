package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

func noEnv(string) string { return "" }

// TestHelpListsEveryCommand: `help`, `-h` and `--help` list every
// sub-command, one line each, and succeed.
func TestHelpListsEveryCommand(t *testing.T) {
	want := []string{"serve", "demo", "sim", "eval", "calibrate", "bench", "overhead", "help"}
	for _, arg := range []string{"help", "-h", "--help", "-help"} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), []string{arg}, &out, &errb, noEnv, nil); err != nil {
			t.Errorf("breakwater %s: %v", arg, err)
			continue
		}
		for _, name := range want {
			if !regexp.MustCompile(`(?m)^  ` + name + ` +\S`).MatchString(out.String()) {
				t.Errorf("breakwater %s: no line for %q:\n%s", arg, name, out.String())
			}
		}
		if errb.Len() != 0 {
			t.Errorf("breakwater %s wrote to stderr: %s", arg, errb.String())
		}
	}
	// Flags before -h: still serve's help, not a started server.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-check", "-h"}, &out, &bytes.Buffer{}, noEnv, nil); err != nil || !strings.HasPrefix(out.String(), "Usage: breakwater serve ") {
		t.Errorf("breakwater -check -h: %v\n%s", err, out.String())
	}
	if n, m := len(commands(noEnv, nil)), len(want)-1; n != m {
		t.Errorf("%d commands, this test lists %d: add the new one to want", n, m)
	}
}

// TestCommandHelp: `help CMD` and `CMD -h` show that command's flags under
// one usage line, succeed, and print no float32 noise as a default.
func TestCommandHelp(t *testing.T) {
	noise := regexp.MustCompile(`\d\.\d*0000\d`)
	for _, c := range commands(noEnv, nil) {
		for _, args := range [][]string{{"help", c.name}, {c.name, "-h"}, {c.name, "--help"}, {c.name, "-seed", "3", "-help"}} {
			var out, errb bytes.Buffer
			if err := run(t.Context(), args, &out, &errb, noEnv, nil); err != nil {
				t.Errorf("breakwater %s: %v", strings.Join(args, " "), err)
				continue
			}
			s := out.String()
			if !strings.HasPrefix(s, "Usage: breakwater "+c.name+" ") || !strings.Contains(s, "\nFlags:\n  -") {
				t.Errorf("breakwater %s: want a usage line and flags, got:\n%s", strings.Join(args, " "), s)
			}
			if strings.Contains(s, "Usage of") || errb.Len() != 0 {
				t.Errorf("breakwater %s: the flag package's own usage leaked:\n%s%s", strings.Join(args, " "), s, errb.String())
			}
			if m := noise.FindString(s); m != "" {
				t.Errorf("breakwater %s: default %s is float32 noise", strings.Join(args, " "), m)
			}
		}
	}
}

// TestUnknownCommand: a typo is an error naming the closest command; it
// returns at once instead of starting a server (which would run until the
// context ends and return no error).
func TestUnknownCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for arg, want := range map[string]string{
		"dmeo":       `did you mean "demo"`,
		"serv":       `did you mean "serve"`,
		"calibrat":   `did you mean "calibrate"`,
		"benchmark":  `did you mean "bench"`,
		"frobnicate": `unknown command "frobnicate"`,
	} {
		var out, errb bytes.Buffer
		err := run(ctx, []string{arg}, &out, &errb, noEnv, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("breakwater %s: %v, want an error containing %s", arg, err, want)
		}
	}
	err := run(ctx, []string{"help", "dmeo"}, &bytes.Buffer{}, &bytes.Buffer{}, noEnv, nil)
	if err == nil || !strings.Contains(err.Error(), `did you mean "demo"`) {
		t.Errorf("breakwater help dmeo: %v", err)
	}
	// After serve's flags, a stray word is refused too.
	err = run(ctx, []string{"serve", "dmeo"}, &bytes.Buffer{}, &bytes.Buffer{}, noEnv, nil)
	if err == nil || !strings.Contains(err.Error(), `serve takes flags only, not "dmeo"`) {
		t.Errorf("breakwater serve dmeo: %v", err)
	}
}
