package file_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	"nodeconverge/modules/file"
)

type testNode struct {
	t   *testing.T
	dir string
	h   *node.Host
}

func newNode(t *testing.T) *testNode {
	t.Helper()
	root := t.TempDir()
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
	return &testNode{t: t, dir: root, h: h}
}

func (n *testNode) check(a *file.Args) (*module.Plan, error) {
	n.t.Helper()
	if err := a.Validate(); err != nil {
		n.t.Fatalf("validate %+v: %v", a, err)
	}
	return file.Module{}.Check(context.Background(), transport.ReadOnly(n.h), a)
}

// converge checks (the plan must change something), applies, and checks
// again: the second plan must be empty.
func (n *testNode) converge(a file.Args) *module.Plan {
	n.t.Helper()
	plan, err := n.check(&a)
	if err != nil {
		n.t.Fatalf("check %+v: %v", a, err)
	}
	if !plan.Changed() {
		n.t.Fatalf("check %+v planned nothing", a)
	}
	if _, err := (file.Module{}).Apply(context.Background(), n.h, plan); err != nil {
		n.t.Fatalf("apply: %v", err)
	}
	again, err := n.check(&a)
	if err != nil {
		n.t.Fatalf("re-check: %v", err)
	}
	if again.Changed() {
		n.t.Fatalf("re-check after apply plans %+v %v", again.Files, again.Commands)
	}
	return plan
}

func TestStates(t *testing.T) {
	n := newNode(t)
	d := filepath.Join(n.dir, "a", "b")
	n.converge(file.Args{Path: d, State: "directory", Mode: "0750"})
	if st, err := os.Stat(d); err != nil || !st.IsDir() || st.Mode().Perm() != 0o750 {
		t.Fatalf("directory: %v %v", st, err)
	}
	n.converge(file.Args{Path: d, State: "directory", Mode: "0755"})
	if st, _ := os.Stat(d); st.Mode().Perm() != 0o755 {
		t.Errorf("directory mode = %v", st.Mode())
	}

	f := filepath.Join(d, "f")
	// touch creates; a second touch plans only the times (see below).
	tp, err := n.check(&file.Args{Dest: f, State: "touch", Mode: "0600"})
	if err != nil || len(tp.Files) != 1 || tp.Files[0].Action != module.Create || !(file.Module{}).ImperativePlan(tp) {
		t.Fatalf("touch of a new file: %+v %v", tp, err)
	}
	if _, err := (file.Module{}).Apply(context.Background(), n.h, tp); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 || st.Size() != 0 {
		t.Fatalf("touch: %v %v", st, err)
	}
	if err := os.WriteFile(f, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.h.Refresh() // written behind the run's back

	n.converge(file.Args{Name: f, Mode: "0644"})
	if b, _ := os.ReadFile(f); string(b) != "keep me\n" {
		t.Errorf("a mode change altered the content: %q", b)
	}
	if st, _ := os.Stat(f); st.Mode().Perm() != 0o644 {
		t.Errorf("file mode = %v", st.Mode())
	}

	l := filepath.Join(n.dir, "link")
	n.converge(file.Args{Path: l, State: "link", Src: f})
	if got, err := os.Readlink(l); err != nil || got != f {
		t.Fatalf("link -> %q, %v", got, err)
	}
	n.converge(file.Args{Path: l, State: "link", Src: d})
	if got, _ := os.Readlink(l); got != d {
		t.Errorf("relinked -> %q", got)
	}

	n.converge(file.Args{Path: f, State: "absent"})
	if _, err := os.Lstat(f); !os.IsNotExist(err) {
		t.Errorf("absent: %v", err)
	}
	if p, err := n.check(&file.Args{Path: f, State: "absent"}); err != nil || p.Changed() {
		t.Errorf("absent again: %+v %v", p, err)
	}
}

// TestTouchExistingChangesEveryRun: as in Ansible, touching an existing
// path changes its times on every run; the plan says so and the module
// tells the runner not to expect an empty re-check.
func TestTouchExistingChangesEveryRun(t *testing.T) {
	n := newNode(t)
	f := filepath.Join(n.dir, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := n.check(&file.Args{Path: f, State: "touch"})
	if err != nil || !p.Changed() || !(file.Module{}).ImperativePlan(p) {
		t.Errorf("touch of an existing file: %+v %v", p, err)
	}
}

func TestRefusals(t *testing.T) {
	n := newNode(t)
	for _, tc := range []struct {
		a    file.Args
		want string
	}{
		{file.Args{Path: n.dir, State: "absent"}, "does not remove directories"},
		{file.Args{Path: filepath.Join(n.dir, "none")}, "does not exist"},
		{file.Args{Path: n.dir, State: "link", Src: "/x"}, "is a directory"},
	} {
		if _, err := n.check(&tc.a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.a, err, tc.want)
		}
	}
	for _, tc := range []struct {
		a    file.Args
		want string
	}{
		{file.Args{Path: "rel"}, "absolute"},
		{file.Args{Path: "/x", State: "hard", Src: "/y"}, "not supported"},
		{file.Args{Path: "/x", Recurse: true}, "recurse is not supported"},
		{file.Args{Path: "/x", State: "link"}, "needs src"},
		{file.Args{Path: "/x", Mode: "u+x"}, "octal"},
	} {
		if err := tc.a.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want %q", tc.a, err, tc.want)
		}
	}
}
