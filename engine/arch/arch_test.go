package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// listModule lists every package of the module with its imports.
func listModule(t *testing.T) (string, []pkg) {
	t.Helper()
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(mod))
	cmd := exec.Command("go", "list", "-json", root+"/...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the module has far more", len(pkgs))
	}
	return root, pkgs
}

// TestNoUpwardImports: every package has a layer, and no package (its
// tests included, tooling aside) imports one of its own layer or above.
func TestNoUpwardImports(t *testing.T) {
	root, pkgs := listModule(t)
	rel := func(path string) (string, bool) {
		if path == root {
			return "", true
		}
		r, ok := strings.CutPrefix(path, root+"/")
		return r, ok
	}
	for _, p := range pkgs {
		from, _ := rel(p.ImportPath)
		lf, ok := Layer(from)
		if !ok {
			t.Errorf("package %s has no layer in arch.Layers: say where it sits", from)
			continue
		}
		seen := map[string]bool{}
		check := func(imports []string, what string) {
			for _, imp := range imports {
				to, ours := rel(imp)
				if !ours || to == from || seen[to] {
					continue
				}
				seen[to] = true
				allowed := Allowed
				if what != "" {
					allowed = AllowedInTest
				}
				if !allowed(from, to) {
					t.Errorf("%s%s imports %s: layer %d may import only lower layers (arch.Layers)", from, what, to, lf)
				}
			}
		}
		check(p.Imports, "")
		check(p.TestImports, " (test)")
		check(p.XTestImports, " (external test)")
	}
}

// TestNoImportCycles: the module's import graph, tests' imports aside, is
// acyclic (the compiler refuses a cycle too; this says where one would be
// before a build does, and keeps the graph a checked artefact).
func TestNoImportCycles(t *testing.T) {
	root, pkgs := listModule(t)
	graph := map[string][]string{}
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, root+"/") {
				graph[p.ImportPath] = append(graph[p.ImportPath], imp)
			}
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(n string)
	visit = func(n string) {
		switch state[n] {
		case onPath:
			for j, p := range path {
				if p == n {
					t.Errorf("import cycle: %s -> %s", strings.Join(path[j:], " -> "), n)
				}
			}
			return
		case done:
			return
		}
		state[n] = onPath
		path = append(path, n)
		for _, m := range graph[n] {
			visit(m)
		}
		path = path[:len(path)-1]
		state[n] = done
	}
	names := make([]string, 0, len(graph))
	for n := range graph {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		visit(n)
	}
}

// TestRulesBite: the rule refuses the imports it exists to refuse.
func TestRulesBite(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"modules/copy", "engine/runner", false},
		{"modules/copy", "engine/node", true},
		{"modules/copy", "engine/playbook", false},
		{"modules/shell", "modules/command", true},
		{"engine/runner", "engine/app", false},
		{"engine/runner", "modules/copy", false},
		{"engine/module", "engine/transport", true},
		{"engine/transport", "engine/module", false},
		{"engine/savedplan", "engine/report", false},
		{"engine/app", "modules/all", true},
		{"engine/newthing", "engine/transport", false},
		{"lab/labtest", "engine/node", true},
		{"engine/node", "lab/labtest", false},
	} {
		if got := Allowed(c.from, c.to); got != c.ok {
			t.Errorf("Allowed(%s, %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"modules/copy", "engine/playbook", true},
		{"engine/runner", "modules/copy", true},
		{"engine/node", "lab/labtest", true},
		{"modules/copy", "engine/runner", false},
		{"engine/module", "engine/playbook", false},
	} {
		if got := AllowedInTest(c.from, c.to); got != c.ok {
			t.Errorf("AllowedInTest(%s, %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

// TestRunnerFilesSmall: no file of the runner is over 600 lines (issue
// 27): the host's run, the batch loop and the apply path each have a file
// a reader can hold in mind.
func TestRunnerFilesSmall(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "runner", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("runner files: %v (found %d)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > 600 {
			t.Errorf("%s has %d lines; split it (at most 600)", f, n)
		}
	}
}
