package overlay_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/overlay"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
)

// testNode is a temp directory served by a real shell through localconn.
type testNode struct {
	t    *testing.T
	root string
	h    *node.Host
}

func newNode(t *testing.T, files map[string]string) *testNode {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
	return &testNode{t: t, root: root, h: h}
}

func (n *testNode) p(rel string) string { return filepath.Join(n.root, rel) }

func (n *testNode) live(rel string) (string, bool) {
	n.t.Helper()
	b, err := os.ReadFile(n.p(rel))
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return string(b), true
}

func TestRecordedChangesAreSeenByQueries(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, map[string]string{
		"conf.d/a.toml":    "a",
		"conf.d/c.toml":    "c",
		"conf.d/d.toml":    "d",
		"conf.d/keep.toml": "k",
	})
	o := overlay.New(transport.ReadOnly(n.h))
	if o.Host() != "n1" {
		t.Errorf("Host() = %q", o.Host())
	}
	o.Record([]module.FileChange{
		{Action: module.Create, Path: n.p("conf.d/b.toml"), After: []byte("b"), Mode: 0o644},
		{Action: module.Create, Path: n.p("conf.d/0.toml"), After: []byte("0"), Mode: 0o644},
		{Action: module.Update, Path: n.p("conf.d/a.toml"), Before: []byte("a"), After: []byte("a2")},
		{Action: module.Delete, Path: n.p("conf.d/c.toml"), Before: []byte("c")},
		{Action: module.Move, From: n.p("conf.d/d.toml"), Path: n.p("moved/d.toml"), Before: []byte("d"), After: []byte("d"), Mode: 0o600},
	})
	glob, moved := n.p("conf.d/*.toml"), n.p("moved/*.toml")
	snap, err := o.Query(ctx, transport.Query{
		Files: []string{n.p("conf.d/a.toml"), n.p("conf.d/c.toml"), n.p("conf.d/d.toml"), n.p("moved/d.toml"), n.p("conf.d/b.toml")},
		Globs: []string{glob, moved},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantGlob := []string{n.p("conf.d/0.toml"), n.p("conf.d/a.toml"), n.p("conf.d/b.toml"), n.p("conf.d/keep.toml")}
	if got := snap.Globs[glob]; !slices.Equal(got, wantGlob) {
		t.Errorf("glob %s = %q, want %q (created added, deleted and moved dropped, sorted)", glob, got, wantGlob)
	}
	if got, want := snap.Globs[moved], []string{n.p("moved/d.toml")}; !slices.Equal(got, want) {
		t.Errorf("glob %s = %q, want %q", moved, got, want)
	}
	for rel, want := range map[string]string{"conf.d/a.toml": "a2", "conf.d/b.toml": "b", "conf.d/0.toml": "0", "conf.d/keep.toml": "k", "moved/d.toml": "d"} {
		f := snap.File(n.p(rel))
		if !f.Exists || string(f.Content) != want {
			t.Errorf("%s = exists %v %q, want %q", rel, f.Exists, f.Content, want)
		}
	}
	for _, rel := range []string{"conf.d/c.toml", "conf.d/d.toml"} {
		if f := snap.File(n.p(rel)); f.Exists {
			t.Errorf("%s exists in the overlay after a planned delete/move", rel)
		}
	}
	// The live node is untouched, and so is what the host itself reads.
	for rel, want := range map[string]string{"conf.d/a.toml": "a", "conf.d/c.toml": "c", "conf.d/d.toml": "d"} {
		if got, ok := n.live(rel); !ok || got != want {
			t.Errorf("live %s = %q (exists %v), want %q", rel, got, ok, want)
		}
	}
	for _, rel := range []string{"conf.d/b.toml", "conf.d/0.toml", "moved/d.toml"} {
		if _, ok := n.live(rel); ok {
			t.Errorf("live %s was created", rel)
		}
	}
	raw, err := n.h.Query(ctx, transport.Query{Files: []string{n.p("conf.d/a.toml")}, Globs: []string{glob}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(raw.File(n.p("conf.d/a.toml")).Content); got != "a" {
		t.Errorf("the host's own Query sees %q: the overlay changed the host's cache", got)
	}
	if want := []string{n.p("conf.d/a.toml"), n.p("conf.d/c.toml"), n.p("conf.d/d.toml"), n.p("conf.d/keep.toml")}; !slices.Equal(raw.Globs[glob], want) {
		t.Errorf("the host's own glob = %q, want %q", raw.Globs[glob], want)
	}
}

func TestNothingRecordedIsTheLiveNode(t *testing.T) {
	n := newNode(t, map[string]string{"x.conf": "x"})
	snap, err := overlay.New(transport.ReadOnly(n.h)).Query(context.Background(), transport.Query{Files: []string{n.p("x.conf"), n.p("y.conf")}})
	if err != nil {
		t.Fatal(err)
	}
	if f := snap.File(n.p("x.conf")); !f.Exists || string(f.Content) != "x" {
		t.Errorf("x.conf = %+v", f)
	}
	if snap.File(n.p("y.conf")).Exists {
		t.Error("y.conf exists")
	}
}

// A planned update that keeps the mode (Mode 0, as copy plans it without a
// `mode`) must not look like a mode change to a later task: apply keeps the
// file's mode and owner, and check mode must agree with it.
func TestUpdateKeepsLiveMetadata(t *testing.T) {
	n := newNode(t, map[string]string{"a.conf": "old"})
	if err := os.Chmod(n.p("a.conf"), 0o640); err != nil {
		t.Fatal(err)
	}
	o := overlay.New(transport.ReadOnly(n.h))
	o.Record([]module.FileChange{
		{Action: module.Update, Path: n.p("a.conf"), After: []byte("new")},
		{Action: module.Create, Path: n.p("b.conf"), After: []byte("b")},
	})
	snap, err := o.Query(context.Background(), transport.Query{Files: []string{n.p("a.conf"), n.p("b.conf")}})
	if err != nil {
		t.Fatal(err)
	}
	live, err := n.h.Query(context.Background(), transport.Query{Files: []string{n.p("a.conf")}})
	if err != nil {
		t.Fatal(err)
	}
	l, a := live.File(n.p("a.conf")), snap.File(n.p("a.conf"))
	if l.Owner == "" || l.Group == "" {
		t.Fatalf("the live query names no owner or group: %+v", l)
	}
	if string(a.Content) != "new" || a.Mode != 0o640 || a.Owner != l.Owner || a.UID != l.UID || a.Group != l.Group || a.GID != l.GID {
		t.Errorf("a.conf = content %q mode %v owner %q:%q (%d:%d); want new, -rw-r-----, the live %q:%q (%d:%d)",
			a.Content, a.Mode, a.Owner, a.Group, a.UID, a.GID, l.Owner, l.Group, l.UID, l.GID)
	}
	// A new file without a mode is created 0644, as Apply creates it.
	if b := snap.File(n.p("b.conf")); b.Mode != fs.FileMode(0o644) {
		t.Errorf("b.conf mode = %v, want -rw-r--r--", b.Mode)
	}
}

// Globs are shell globs: `*` does not match a leading dot, on the live
// node and in the overlay alike.
func TestGlobSkipsHiddenFilesLikeTheShell(t *testing.T) {
	n := newNode(t, map[string]string{"d/.live.toml": "l", "d/x.toml": "x"})
	o := overlay.New(transport.ReadOnly(n.h))
	o.Record([]module.FileChange{{Action: module.Create, Path: n.p("d/.planned.toml"), After: []byte("p")}})
	star, dot := n.p("d/*.toml"), n.p("d/.*.toml")
	snap, err := o.Query(context.Background(), transport.Query{Globs: []string{star, dot}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := snap.Globs[star], []string{n.p("d/x.toml")}; !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", star, got, want)
	}
	if got, want := snap.Globs[dot], []string{n.p("d/.live.toml"), n.p("d/.planned.toml")}; !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", dot, got, want)
	}
}
