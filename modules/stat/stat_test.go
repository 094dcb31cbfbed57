package stat_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/overlay"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	statmod "nodeconverge/modules/stat"
)

func newHost(t *testing.T) *node.Host {
	root := t.TempDir()
	return node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
}

func statOf(t *testing.T, r transport.Reader, a *statmod.Args) map[string]any {
	t.Helper()
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	plan, err := statmod.Module{}.Check(context.Background(), r, a)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Changed() {
		t.Fatalf("stat plans a change: %+v", plan)
	}
	st, _ := plan.Vars["stat"].(map[string]any)
	return st
}

func args(p string, follow bool, algo string) *statmod.Args {
	a := statmod.Module{}.NewArgs().(*statmod.Args)
	a.Path, a.Follow = p, follow
	if algo != "" {
		a.ChecksumAlgorithm = algo
	}
	return a
}

// TestLikeAnsible stats a file, a directory, an executable, a symlink
// (followed and not), a dangling link and a missing path with Ansible's own
// stat module and with nodeconverge's, and asserts the same values for every
// key Ansible returns that nodeconverge does too (all but mimetype,
// charset, attributes and version), atime aside (the reads change it).
func TestLikeAnsible(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "f"), []byte("overlay\nbr_netfilter\n"), 0o640))
	must(os.WriteFile(filepath.Join(dir, "x"), []byte("#!/bin/sh\n"), 0o4755))
	must(os.Mkdir(filepath.Join(dir, "d"), 0o700))
	must(os.Symlink("f", filepath.Join(dir, "l")))
	must(os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	type c struct {
		path   string
		follow bool
		algo   string
	}
	cs := []c{{"f", false, ""}, {"f", false, "sha256"}, {"x", false, ""}, {"d", false, ""}, {"l", false, ""}, {"l", true, ""}, {"dangling", false, ""}, {"dangling", true, ""}, {"missing", false, ""}}
	var tasks []map[string]any
	for _, x := range cs {
		a := map[string]any{"path": filepath.Join(dir, x.path), "follow": x.follow}
		if x.algo != "" {
			a["checksum_algorithm"] = x.algo
		}
		tasks = append(tasks, map[string]any{"module": "stat", "args": a})
	}
	b, _ := json.Marshal(tasks)
	in := filepath.Join(t.TempDir(), "tasks.json")
	must(os.WriteFile(in, b, 0o644))
	driver, _ := filepath.Abs("../edit/testdata/ansible_modules.py")
	cmd := exec.Command("/usr/bin/python3", driver, in, t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ansible stat: %v\n%s", err, errb.String())
	}
	var want []struct {
		Stat map[string]any `json:"stat"`
	}
	must(json.Unmarshal(out.Bytes(), &want))
	h := newHost(t)
	for i, x := range cs {
		got := statOf(t, transport.ReadOnly(h), args(filepath.Join(dir, x.path), x.follow, x.algo))
		if len(want[i].Stat) == 0 || len(got) == 0 || got["exists"] != want[i].Stat["exists"] {
			t.Fatalf("%s: nodeconverge %v, ansible %v", x.path, got, want[i].Stat)
		}
		for k, w := range want[i].Stat {
			switch k {
			case "mimetype", "charset", "attributes", "version", "attr_flags", "atime", "device_type":
				continue
			}
			g, ok := got[k]
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			if k == "mtime" || k == "ctime" {
				gf, _ := g.(float64)
				wf, _ := w.(float64)
				if gf-wf > 0.001 || wf-gf > 0.001 {
					t.Errorf("%s (follow %v): %s: nodeconverge %v, ansible %v", x.path, x.follow, k, g, w)
				}
				continue
			}
			if !ok || string(gj) != string(wj) {
				t.Errorf("%s (follow %v): %s: nodeconverge %s, ansible %s", x.path, x.follow, k, gj, wj)
			}
		}
	}
}

// TestPlannedState: an earlier task's planned write or removal is what
// stat sees, through the overlay the up-front plan and check mode use.
func TestPlannedState(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "k8s.conf")
	if err := os.WriteFile(p, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	ov := overlay.New(transport.ReadOnly(h))
	ov.Record([]module.FileChange{{Action: module.Update, Path: p, After: []byte("overlay\n")}})
	st := statOf(t, ov, args(p, false, ""))
	sum := sha1.Sum([]byte("overlay\n"))
	if st["exists"] != true || st["size"] != 8 || st["mode"] != "0600" || st["checksum"] != hex.EncodeToString(sum[:]) {
		t.Errorf("planned update: %v", st)
	}
	newp := filepath.Join(dir, "new.conf")
	ov.Record([]module.FileChange{{Action: module.Create, Path: newp, After: []byte("x\n"), Mode: 0o644}, {Action: module.Delete, Path: p}})
	if st := statOf(t, ov, args(newp, false, "")); st["exists"] != true || st["isreg"] != true || st["mode"] != "0644" {
		t.Errorf("planned create: %v", st)
	}
	if st := statOf(t, ov, args(p, false, "")); st["exists"] != false {
		t.Errorf("planned delete: %v", st)
	}
	if st := statOf(t, transport.ReadOnly(h), args(newp, false, "")); st["exists"] != false {
		t.Errorf("live node: %v", st)
	}
}
