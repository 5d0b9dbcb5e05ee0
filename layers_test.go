package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/breakwater-dev/breakwater"

// layers ranks every package of the module, lowest first; a package may
// import packages of its own rank or a lower one, never a higher one (the
// ranks are the table in docs/ARCHITECTURE.md, "Layers"). The longest
// matching prefix ranks a package; one that matches none fails the test, so a
// new package is placed on purpose.
var layers = []struct {
	rank     int
	prefixes []string
}{
	// Leaf libraries: no import from the module.
	{0, []string{"internal/lib/"}},
	// Domain libraries: the cache's types and the exact tier, the guard, the
	// encoder, and their test helpers.
	{1, []string{"cache", "cache/guard", "cache/indextest", "cache/keytest", "cache/qdrant/qdranttest", "embed", "embed/internal/"}},
	// Backends and services built on them: the semantic indexes, the judge,
	// the upstream caller and its lane admission.
	{2, []string{"cache/embedded", "cache/qdrant", "cache/verify", "proxy/upstream", "proxy/upstream/lane"}},
	// The wire-API seam: the Format, the hooks, the registration.
	{3, []string{"proxy/wire"}},
	// One package per wire API, and the one list of them.
	{4, []string{"proxy/wire/"}},
	// The HTTP front: routes, the cached flow, pass-through.
	{5, []string{"proxy"}},
	// Configuration: reads the file and builds the options of the layers below.
	{6, []string{"config"}},
	// The composition root: wires config into the parts and serves.
	{7, []string{"internal/app"}},
	// Sub-commands, and the deployment manifests' tests.
	{8, []string{"internal/cmd/", "deploy", "cache/qdrant/qdranttest/cmd/"}},
	// The simulated model and the load generator are commands that are also
	// test peers: they import only leaf libraries, and the composition
	// root's end-to-end tests drive the sidecar with them.
	{1, []string{"internal/cmd/sim", "internal/cmd/loadgen"}},
	// The binary.
	{9, []string{""}},
}

// rankOf returns the rank of a package path relative to the module ("" is
// the module root), and false when no layer claims it.
func rankOf(rel string) (int, bool) {
	best, rank := -1, 0
	for _, l := range layers {
		for _, p := range l.prefixes {
			// "x/" ranks everything beneath x; any other entry one package.
			match := rel == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p))
			if match && len(p) > best {
				best, rank = len(p), l.rank
			}
		}
	}
	return rank, best >= 0
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// TestNoImportFromALowerLayerToAHigherOne reads every package's imports
// (its own and its tests') with `go list -json` and fails on an import that
// goes up the layers.
func TestNoImportFromALowerLayerToAHigherOne(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-json", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	rel := func(path string) (string, bool) {
		if path == module {
			return "", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	packages := 0
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		packages++
		from, _ := rel(p.ImportPath)
		fromRank, ok := rankOf(from)
		if !ok {
			t.Errorf("package %q is in no layer: add it to layers (and to docs/ARCHITECTURE.md)", p.ImportPath)
			continue
		}
		for kind, imports := range map[string][]string{"imports": p.Imports, "test imports": append(p.TestImports, p.XTestImports...)} {
			for _, imp := range imports {
				to, ok := rel(imp)
				if !ok || to == from {
					continue
				}
				toRank, ok := rankOf(to)
				if !ok {
					t.Errorf("%s %s %q, which is in no layer", p.ImportPath, kind, imp)
					continue
				}
				if toRank > fromRank {
					t.Errorf("%s (layer %d) %s %s (layer %d): a lower layer imports a higher one", p.ImportPath, fromRank, kind, imp, toRank)
				}
			}
		}
	}
	if packages < 10 {
		t.Fatalf("go list returned %d packages; the check saw too little to mean anything", packages)
	}
}

// The check catches what it is for: the imports issue 27 removed would fail it.
func TestLayersRankTheRemovedImportsAsViolations(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"cache/verify", "proxy"},
		{"embed", "internal/app"},
		{"config", "internal/cmd/demo"},
		{"internal/lib/retry", "cache"},
		{"proxy/upstream", "proxy"},
		{"proxy/wire", "proxy"},
		{"proxy/wire/gemini", "proxy"},
		{"proxy/wire", "proxy/wire/apis"},
	} {
		f, okf := rankOf(c.from)
		to, okt := rankOf(c.to)
		if !okf || !okt || to <= f {
			t.Errorf("%s -> %s: ranks %d -> %d, want an upward import", c.from, c.to, f, to)
		}
	}
}
