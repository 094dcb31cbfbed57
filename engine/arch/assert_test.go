package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// moduleInterfaces are the interfaces declared in engine/module and under
// modules/, by import path relative to the module root, read from the
// source under dir (the module root).
func moduleInterfaces(t *testing.T, dir string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, top := range []string{"engine/module", "modules"} {
		err := filepath.WalkDir(filepath.Join(dir, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			if top == "engine/module" && filepath.Dir(path) != filepath.Join(dir, top) {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return fmt.Errorf("parse %s: %w", path, err)
			}
			rel, err := filepath.Rel(dir, filepath.Dir(path))
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, s := range g.Specs {
					ts := s.(*ast.TypeSpec)
					if _, ok := ts.Type.(*ast.InterfaceType); ok {
						if out[rel] == nil {
							out[rel] = map[string]bool{}
						}
						out[rel][ts.Name.Name] = true
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !out["engine/module"]["Module"] {
		t.Fatalf("found no module.Module among %v: the walk is broken", out)
	}
	return out
}

// driverAssertions lists each type assertion (x.(T) and a type switch's
// cases) in src that names an interface a module could implement, as
// "file:line: T", except those allowed (DriverAssertions' entries for the
// package). root is the module's import path; ifaces are from
// moduleInterfaces.
func driverAssertions(fset *token.FileSet, f *ast.File, root string, ifaces map[string]map[string]bool, allowed map[string]string) []string {
	imports := map[string]string{} // local name -> path relative to root
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			continue
		}
		rel, ours := strings.CutPrefix(p, root+"/")
		if !ours {
			continue
		}
		name := rel[strings.LastIndex(rel, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = rel
	}
	var out []string
	flag := func(typ ast.Expr) {
		if typ == nil {
			return
		}
		what := ""
		switch e := typ.(type) {
		case *ast.InterfaceType:
			what = "an interface literal"
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			if !ok {
				return
			}
			rel, ok := imports[x.Name]
			if !ok || !ifaces[rel][e.Sel.Name] {
				return
			}
			if _, ok := allowed[rel+"."+e.Sel.Name]; ok {
				return
			}
			what = rel + "." + e.Sel.Name
		default:
			return
		}
		out = append(out, fmt.Sprintf("%s: %s", fset.Position(typ.Pos()), what))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeAssertExpr:
			flag(n.Type)
		case *ast.TypeSwitchStmt:
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					flag(e)
				}
			}
		}
		return true
	})
	return out
}

// TestDriversReadTheRegistration: the runner, the playbook loader, the
// application and the command line learn what a module can do from its
// module.Registration, never by type-asserting it (or its Args, or its
// plan) to an interface a module could implement (arch.Drivers).
func TestDriversReadTheRegistration(t *testing.T) {
	root, _ := listModule(t)
	dir := filepath.Join("..", "..")
	ifaces := moduleInterfaces(t, dir)
	var bad []string
	checked := 0
	for _, d := range Drivers {
		err := filepath.WalkDir(filepath.Join(dir, d), func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return fmt.Errorf("parse %s: %w", path, err)
			}
			rel, err := filepath.Rel(dir, filepath.Dir(path))
			if err != nil {
				return err
			}
			checked++
			bad = append(bad, driverAssertions(fset, f, root, ifaces, DriverAssertions[filepath.ToSlash(rel)])...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d driver files; the drivers have far more", checked)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a driver type-asserts to an interface a module could implement; state the capability in module.Registration and read it there", b)
	}
}

// TestDriverRuleBites: the check finds an interface literal, a module
// interface under any import name and in a type switch, and leaves alone
// a concrete type, an interface of another package and an allowed one.
func TestDriverRuleBites(t *testing.T) {
	src := `package runner

import (
	"io"
	mod "example.com/m/engine/module"
	"example.com/m/modules/containerd/ctrconf"
	"example.com/m/engine/playbook"
)

func f(m mod.Module, a mod.Args, r io.Reader) {
	_, _ = m.(interface{ Imperative() bool })
	_, _ = m.(mod.Prober)
	switch a.(type) {
	case mod.VarsArgs, *playbook.LoopArgs:
	}
	_, _ = r.(io.Closer)
	_, _ = a.(*playbook.LoopArgs)
	_, _ = m.(ctrconf.Declarer)
	_, _ = m.(ctrconf.Other)
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	ifaces := map[string]map[string]bool{
		"engine/module":              {"Prober": true, "VarsArgs": true, "Module": true},
		"modules/containerd/ctrconf": {"Declarer": true, "Other": true},
	}
	got := driverAssertions(fset, f, "example.com/m", ifaces, map[string]string{"modules/containerd/ctrconf.Declarer": "test"})
	want := []string{
		"x.go:11:12: an interface literal",
		"x.go:12:12: engine/module.Prober",
		"x.go:14:7: engine/module.VarsArgs",
		"x.go:19:12: modules/containerd/ctrconf.Other",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("driverAssertions found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
