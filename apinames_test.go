package main

import (
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// wireAPINames are the words that name one wire API in code: the
// providers whose APIs are served, their endpoints, and the key functions,
// constants and Formats of each API. Bare "responses", "messages" and
// "chat" are not in the list: they are also the plain English words of
// HTTP and of every API (a ResponseWriter, error messages); the Responses,
// Messages and Chat APIs are caught by their paths and their identifiers.
var wireAPINames = []string{
	"anthropic", "claude", "gemini", "generatecontent", "vertex",
	"/v1/messages", "/v1/responses", "/v1beta",
	"chatendpoint", "messagesendpoint", "responsesendpoint", "geminiendpoint",
	"chatkey", "messageskey", "responseskey", "geminikey",
	"responsesapi", "responsesformat", "messagesformat", "chatformat",
}

// proxyNames adds, for the proxy's core, the names of OpenAI's API and the
// providers' credential headers and ids: the core serves every API alike
// and passes every credential through unread.
var proxyNames = append([]string{
	"openai", "goog", "x-api-key", "chatcmpl", "chat.completion",
	"/v1/chat/completions", "/v1/completions", "/v1/embeddings",
}, wireAPINames...)

// coreDirs are the packages that must know no wire API: the core of the
// proxy, the configuration and the composition root. An API is known only
// through its registration (proxy/wire/apis.All). config and internal/app
// are checked for the wire APIs' names only: they also configure the
// OpenAI-compatible embedder (embed.openai), the upstreams' auth styles
// (proxy/upstream's "x-api-key", "x-goog-api-key") and the LLM judge's
// Chat Completions call, which are not a wire API the proxy serves. cache
// is checked for the wire APIs' names too: it holds the key library every
// API's key function is built on, and the key functions (ChatKey among them)
// live in the APIs' packages.
var coreDirs = map[string][]string{"cache": wireAPINames, "proxy": proxyNames, "proxy/flow": proxyNames, "proxy/flow/owners": proxyNames, "proxy/flow/stored": proxyNames, "proxy/observe": proxyNames,
	"config": wireAPINames, "internal/app": wireAPINames}

// apiNamesIn returns "file:line:col: token" for every identifier or string
// literal of src that holds an API's name. Comments are left out: they cite
// the provider behaviour that forced a choice, which is how the house
// documents code.
func apiNamesIn(file string, src []byte, names []string) []string {
	fset := token.NewFileSet()
	f := fset.AddFile(file, fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, 0)
	var hits []string
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return hits
		}
		if tok != token.IDENT && tok != token.STRING && tok != token.CHAR {
			continue
		}
		low := strings.ToLower(lit)
		for _, n := range names {
			if strings.Contains(low, n) {
				hits = append(hits, fset.Position(pos).String()+": "+lit)
				break
			}
		}
	}
}

// TestNoAPINameInCore reads the core's non-test Go files and fails on an
// API's name in their code.
func TestNoAPINameInCore(t *testing.T) {
	files := 0
	for dir, names := range coreDirs {
		paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			p = filepath.ToSlash(p)
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for _, hit := range apiNamesIn(p, src, names) {
				t.Errorf("%s: an API's name in the core; it belongs in the API's package under proxy/wire", hit)
			}
		}
	}
	if files < 30 {
		t.Fatalf("read %d core files; the check saw too little to mean anything", files)
	}
}

// The check catches what it is for: the names the core held before issue
// 27, in code, fail it; the same words in a comment do not.
func TestAPINamesInCodeAreFound(t *testing.T) {
	for _, src := range []string{
		`package p; const h = "Anthropic-Version"`,
		`package p; func f() { _ = s.opts.GeminiUpstream }`,
		`package p; var x = cache.MessagesEndpoint`,
		`package p; func f() { e.POST("/v1/responses", nil) }`,
		`package p; func f() string { return "chatcmpl-bw" }`,
	} {
		if hits := apiNamesIn("x.go", []byte(src), proxyNames); len(hits) == 0 {
			t.Errorf("no API name found in %s", src)
		}
	}
	if hits := apiNamesIn("x.go", []byte("package p\n// As Anthropic's API does.\nvar x = 1\n"), proxyNames); len(hits) != 0 {
		t.Errorf("a comment counted as code: %v", hits)
	}
}

// TestCoreImportsNoAPI: the proxy's core reaches the APIs through
// proxy/wire alone; only the composition root and the tests import the list
// of APIs (proxy/wire/apis) or an API's package.
func TestCoreImportsNoAPI(t *testing.T) {
	for _, pkg := range []string{"./proxy", "./proxy/flow", "./proxy/flow/owners", "./proxy/flow/stored", "./proxy/observe"} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		imports := strings.Fields(string(out))
		if pkg == "./proxy" && !slices.Contains(imports, module+"/proxy/wire") {
			t.Fatalf("proxy does not import proxy/wire (imports %v): the check reads the wrong list", imports)
		}
		for _, imp := range imports {
			if strings.HasPrefix(imp, module+"/proxy/wire/") {
				t.Errorf("%s imports %s: the core may import proxy/wire only, never an API", pkg, imp)
			}
		}
	}
}
