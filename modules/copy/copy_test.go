package copy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	copymod "nodeconverge/modules/copy"
)

type testNode struct {
	t   *testing.T
	dir string
	h   *node.Host
}

func newNode(t *testing.T) *testNode {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "etc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
	return &testNode{t: t, dir: dir, h: h}
}

func (n *testNode) check(a *copymod.Args) (*module.Plan, error) {
	n.t.Helper()
	if err := a.Validate(); err != nil {
		n.t.Fatalf("validate args: %v", err)
	}
	return copymod.Module{}.Check(context.Background(), transport.ReadOnly(n.h), a)
}

// converge checks, applies and checks again, which must come back clean.
func (n *testNode) converge(a *copymod.Args) *module.Plan {
	n.t.Helper()
	plan, err := n.check(a)
	if err != nil {
		n.t.Fatalf("check: %v", err)
	}
	if _, err := (copymod.Module{}).Apply(context.Background(), n.h, plan); err != nil {
		n.t.Fatalf("apply: %v", err)
	}
	again, err := n.check(a)
	if err != nil {
		n.t.Fatalf("re-check: %v", err)
	}
	if again.Changed() {
		n.t.Fatalf("re-check after apply plans %+v", again.Files)
	}
	return plan
}

func str(s string) *string { return &s }

func readMode(t *testing.T, p string) (string, os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), fi.Mode().Perm()
}

func TestCreateUpdateNoop(t *testing.T) {
	n := newNode(t)
	dest := filepath.Join(n.dir, "app.conf")
	plan := n.converge(&copymod.Args{Dest: dest, Content: str("one\n")})
	if len(plan.Files) != 1 || plan.Files[0].Action != module.Create || plan.Files[0].Mode != 0o644 || plan.Files[0].BeforeHash != "" {
		t.Errorf("create plan = %+v", plan.Files)
	}
	if got, mode := readMode(t, dest); got != "one\n" || mode != 0o644 {
		t.Errorf("after create: %q %v", got, mode)
	}

	plan = n.converge(&copymod.Args{Dest: dest, Content: str("two\n")})
	f := plan.Files[0]
	if len(plan.Files) != 1 || f.Action != module.Update || string(f.Before) != "one\n" || f.BeforeHash != module.Hash([]byte("one\n")) || len(f.Reasons) != 1 || f.Reasons[0] != "content" {
		t.Errorf("update plan = %+v", plan.Files)
	}
	if got, _ := readMode(t, dest); got != "two\n" {
		t.Errorf("after update: %q", got)
	}

	plan, err := n.check(&copymod.Args{Dest: dest, Content: str("two\n")})
	if err != nil || plan.Changed() {
		t.Errorf("no-op: plan %+v, err %v", plan, err)
	}
}

func TestModeChangeOnly(t *testing.T) {
	n := newNode(t)
	dest := filepath.Join(n.dir, "secret.conf")
	if err := os.WriteFile(dest, []byte("s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dest, 0o644); err != nil {
		t.Fatal(err)
	}
	plan := n.converge(&copymod.Args{Dest: dest, Content: str("s\n"), Mode: "0600"})
	if f := plan.Files[0]; f.Action != module.Update || len(f.Reasons) != 1 || f.Reasons[0] != "mode 0644 -> 0600" {
		t.Errorf("plan = %+v, want a mode-only update", plan.Files)
	}
	if got, mode := readMode(t, dest); got != "s\n" || mode != 0o600 {
		t.Errorf("after apply: %q %v", got, mode)
	}
}

func TestValidateFailureLeavesFileUntouched(t *testing.T) {
	n := newNode(t)
	dest := filepath.Join(n.dir, "sudoers")
	if err := os.WriteFile(dest, []byte("good\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The validator sees the candidate under the destination's base name.
	a := &copymod.Args{Dest: dest, Content: str("broken\n"), ValidateCmd: `echo "checking $(basename %s)" >&2; grep -q good %s || { echo "parse error in candidate" >&2; exit 1; }`}
	plan, err := n.check(a)
	var ve *module.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("check: plan %+v, err %v; want a *module.ValidationError", plan, err)
	}
	if !strings.Contains(ve.Msg, "parse error in candidate") || !strings.Contains(ve.Msg, "the live file is unchanged") {
		t.Errorf("message = %q", ve.Msg)
	}
	if len(ve.Evidence) != 1 || ve.Evidence[0].OK || !ve.Evidence[0].Required || !strings.Contains(ve.Evidence[0].Output, "sudoers") {
		t.Errorf("evidence = %+v", ve.Evidence)
	}
	if got, _ := readMode(t, dest); got != "good\n" {
		t.Errorf("live file = %q after a failed validation", got)
	}

	// The same validator passes a good candidate and says so in the plan.
	a.Content = str("good again\n")
	plan = n.converge(a)
	if len(plan.Evidence) != 1 || !plan.Evidence[0].OK {
		t.Errorf("evidence = %+v", plan.Evidence)
	}
}

func TestBackupPlansHashNamedFile(t *testing.T) {
	n := newNode(t)
	dest := filepath.Join(n.dir, "app.conf")
	if err := os.WriteFile(dest, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dest, 0o640); err != nil {
		t.Fatal(err)
	}
	a := &copymod.Args{Dest: dest, Content: str("new\n"), Backup: true}
	first, err := n.check(a)
	if err != nil {
		t.Fatal(err)
	}
	// Check and apply must agree on the name, so it cannot be a timestamp.
	second, err := n.check(a)
	if err != nil {
		t.Fatal(err)
	}
	backup := dest + "." + module.Hash([]byte("old\n"))[:12] + "~"
	if len(first.Files) != 2 || first.Files[1].Path != backup || first.Files[1].Action != module.Create || first.Files[1].Mode != 0o640 || second.Files[1].Path != backup {
		t.Fatalf("plan = %+v, want the update and a backup at %s", first.Files, backup)
	}
	n.converge(a)
	if got, mode := readMode(t, backup); got != "old\n" || mode != 0o640 {
		t.Errorf("backup = %q %v", got, mode)
	}
	// Converged: the backup is not planned again.
	if plan, err := n.check(a); err != nil || plan.Changed() {
		t.Errorf("after apply: %+v, %v", plan, err)
	}
}

func TestSrcRelativeToBaseDir(t *testing.T) {
	n := newNode(t)
	base := t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "files", "motd"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(n.dir, "motd")
	a := &copymod.Args{Dest: dest, Src: "files/motd"}
	a.SetBaseDir(base)
	n.converge(a)
	if got, _ := readMode(t, dest); got != "hello\n" {
		t.Errorf("dest = %q", got)
	}
	// A src that is not there fails Check, naming the read.
	b := &copymod.Args{Dest: dest, Src: "files/motd-missing"}
	b.SetBaseDir(base)
	if _, err := n.check(b); err == nil || !strings.Contains(err.Error(), "read src") {
		t.Errorf("missing src: err = %v", err)
	}
}

func TestArgsValidate(t *testing.T) {
	for _, a := range []*copymod.Args{
		{Content: str("x")},
		{Dest: "relative", Content: str("x")},
		{Dest: "/x"},
		{Dest: "/x", Content: str("x"), Src: "y"},
		{Dest: "/x", Content: str("x"), ValidateCmd: "true"},
		{Dest: "/x", Content: str("x"), Mode: "u+rw"},
	} {
		if err := a.Validate(); err == nil {
			t.Errorf("%+v: Validate accepted it", a)
		}
	}
}

// TestRemoteSrc: remote_src copies a file of the node: its content and,
// as Ansible's copystat does, its mode; a second run changes nothing; a
// missing src or a directory is refused.
func TestRemoteSrc(t *testing.T) {
	n := newNode(t)
	src, dest := filepath.Join(n.dir, "runc.amd64"), filepath.Join(n.dir, "runc")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := n.converge(&copymod.Args{Src: src, Dest: dest, RemoteSrc: true})
	if len(plan.Files) != 1 || plan.Files[0].Action != module.Create {
		t.Fatalf("plan: %+v", plan.Files)
	}
	if got, mode := readMode(t, dest); got != "#!/bin/sh\n" || mode != 0o755 {
		t.Errorf("dest = %q %v, want src's content and mode", got, mode)
	}
	if err := os.WriteFile(src, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	n.h.Refresh() // a new run: the node changed behind the first one's cache
	n.converge(&copymod.Args{Src: src, Dest: dest, RemoteSrc: true, Mode: "0750"})
	if got, mode := readMode(t, dest); got != "#!/bin/sh\nexit 0\n" || mode != 0o750 {
		t.Errorf("dest = %q %v, want the new content with the mode given", got, mode)
	}
	for _, bad := range []string{filepath.Join(n.dir, "nope"), n.dir} {
		a := &copymod.Args{Src: bad, Dest: dest, RemoteSrc: true}
		if _, err := n.check(a); err == nil {
			t.Errorf("remote_src %s: want refused", bad)
		}
	}
}
