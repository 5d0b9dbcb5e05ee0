package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/breakwater-dev/breakwater"

// layers ranks the module's folders, lowest first; a package may import
// packages of its own rank or a lower one, never a higher one (the ranks are
// the table in docs/ARCHITECTURE.md, "Layers"). A package takes the rank of
// the deepest folder listed here that holds it (the folder itself or one of
// its parents; "x/*" is every folder inside x but not x itself): ranks are
// given by folder, never by package, so a new package takes the rank of
// where it is put. The leaf libraries have a top-level folder of their own
// (TestNoFolderHoldsTheTopAndTheBottom).
var layers = []struct {
	rank    int
	folders []string
}{
	// Leaf libraries: no import from the module.
	{0, []string{"lib"}},
	// Domain libraries: the cache's types and exact tier, the guard, the
	// encoder, and their test helpers.
	{1, []string{"cache", "embed", "cache/qdrant/qdranttest", "fleet/redistest"}},
	// Backends and services built on them: the semantic indexes, the judge,
	// the upstream caller and its lane admission.
	{2, []string{"cache/embedded", "cache/qdrant", "cache/verify", "proxy/upstream"}},
	// The wire-API seam: the Format, the hooks, the registration; the
	// fleet's shared state (budgets around the caller, reading usage
	// through the seam).
	{3, []string{"proxy/wire", "fleet"}},
	// One package per wire API, and the one list of them.
	{4, []string{"proxy/wire/*"}},
	// The request flow: key, lookup, coalescing, the call, write-back,
	// relay and replay, and its packages (stored answers, ids' owners).
	{5, []string{"proxy/flow"}},
	// The subscribers of the flow's Records: tokens, windows, metrics.
	{6, []string{"proxy/observe"}},
	// The HTTP adapter: routes, limits, API mounting, headers, pass-through.
	{7, []string{"proxy"}},
	// Configuration: reads the file and builds the options of the layers below.
	{8, []string{"config"}},
	// The composition root: wires config into the parts and serves.
	{9, []string{"internal/app"}},
	// Sub-commands, and the deployment manifests' tests.
	{10, []string{"internal/cmd", "deploy", "cache/qdrant/qdranttest/cmd"}},
	// The simulated model and the load generator are commands that are also
	// test peers: they import only leaf libraries, and the composition
	// root's end-to-end tests drive the sidecar with them.
	{1, []string{"internal/cmd/sim", "internal/cmd/loadgen"}},
	// The binary.
	{11, []string{""}},
}

// rankOf returns the rank of a package path relative to the module ("" is
// the module root): the rank of the deepest listed folder that holds it, and
// false when none does.
func rankOf(rel string) (int, bool) {
	best, rank := -1, 0
	for _, l := range layers {
		for _, f := range l.folders {
			if inFolder(rel, f) && len(f) > best {
				best, rank = len(f), l.rank
			}
		}
	}
	return rank, best >= 0
}

// inFolder reports whether the package at rel lies in folder f (or is it);
// for "x/*", whether it lies inside x.
func inFolder(rel, f string) bool {
	if parent, ok := strings.CutSuffix(f, "/*"); ok {
		return strings.HasPrefix(rel, parent+"/")
	}
	return f == "" || rel == f || strings.HasPrefix(rel, f+"/")
}

// topRank is the lowest rank of the top of the house: the composition root
// and the commands.
const topRank = 9

// mixedFolders returns the top-level folders that hold both a leaf library
// (rank 0) and a package of the top (rank >= topRank), with what they hold.
func mixedFolders(packages []string) []string {
	type span struct{ leaf, top string }
	spans := map[string]*span{}
	for _, rel := range packages {
		top, _, nested := strings.Cut(rel, "/")
		if !nested {
			continue // the module root and one-folder packages hold no others
		}
		rank, ok := rankOf(rel)
		if !ok {
			continue
		}
		s := spans[top]
		if s == nil {
			s = &span{}
			spans[top] = s
		}
		switch {
		case rank == 0 && s.leaf == "":
			s.leaf = rel
		case rank >= topRank && s.top == "":
			s.top = rel
		}
	}
	var out []string
	for top, s := range spans {
		if s.leaf != "" && s.top != "" {
			out = append(out, fmt.Sprintf("%s/ holds the leaf library %s and the top's %s", top, s.leaf, s.top))
		}
	}
	slices.Sort(out)
	return out
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
	packages := listPackages(t)
	for _, p := range packages {
		from, _ := rel(p.ImportPath)
		fromRank, ok := rankOf(from)
		if !ok {
			t.Errorf("package %q is in no layer: put it in a ranked folder, or rank its folder in layers (and in docs/ARCHITECTURE.md)", p.ImportPath)
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
}

// TestNoFolderHoldsTheTopAndTheBottom: the leaf libraries live apart from
// the composition root and the commands (issue 40), so the folders show the
// layers.
func TestNoFolderHoldsTheTopAndTheBottom(t *testing.T) {
	var rels []string
	for _, p := range listPackages(t) {
		r, _ := rel(p.ImportPath)
		rels = append(rels, r)
	}
	for _, m := range mixedFolders(rels) {
		t.Error(m)
	}
	// The layout before issue 40 is caught: internal/ held lib/ beside app/.
	saved := layers
	defer func() { layers = saved }()
	layers = append(slices.Clone(layers), struct {
		rank    int
		folders []string
	}{0, []string{"internal/lib"}})
	if got := mixedFolders([]string{"internal/lib/retry", "internal/app", "cache"}); len(got) != 1 || !strings.HasPrefix(got[0], "internal/ ") {
		t.Errorf("mixedFolders(the old layout) = %q, want internal/ named", got)
	}
}

// rel returns a package path relative to the module ("" for the module
// root), and false for a package of another module.
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

// listPackages lists the module's packages with `go list -json ./...`.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
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
	var packages []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		packages = append(packages, p)
	}
	if len(packages) < 10 {
		t.Fatalf("go list returned %d packages; the check saw too little to mean anything", len(packages))
	}
	return packages
}

// The check catches what it is for: the imports issue 27 removed would fail it.
func TestLayersRankTheRemovedImportsAsViolations(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"cache/verify", "proxy"},
		{"embed", "internal/app"},
		{"config", "internal/cmd/demo"},
		{"lib/retry", "cache"},
		{"proxy/upstream", "proxy"},
		{"proxy/wire", "proxy"},
		{"proxy/wire/gemini", "proxy"},
		{"proxy/wire", "proxy/wire/apis"},
		{"proxy/flow", "proxy/observe"},
		{"proxy/observe", "proxy"},
		{"proxy/wire/openai", "proxy/flow"},
	} {
		f, okf := rankOf(c.from)
		to, okt := rankOf(c.to)
		if !okf || !okt || to <= f {
			t.Errorf("%s -> %s: ranks %d -> %d, want an upward import", c.from, c.to, f, to)
		}
	}
}
