package find_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/overlay"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/transport/localconn"
	findmod "nodeconverge/modules/find"
)

// decode reads args into a as the loader does, through YAML.
func decode(args map[string]any, a *findmod.Args) error {
	b, err := yaml.Marshal(args)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, a)
}

func newHost(t *testing.T) *node.Host {
	root := t.TempDir()
	return node.NewHost(localconn.New("n1"), node.HostOptions{StateDir: filepath.Join(root, "state"), RunID: "20260101T000000Z-test"})
}

// findOf runs find's Check with args given as Ansible's (a mapping, decoded
// through YAML as the loader does) and returns its registered values.
func findOf(t *testing.T, r transport.Reader, args map[string]any) map[string]any {
	t.Helper()
	a := findmod.Module{}.NewArgs().(*findmod.Args)
	if err := decode(args, a); err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	plan, err := findmod.Module{}.Check(context.Background(), r, a)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Changed() {
		t.Fatalf("find plans a change: %+v", plan)
	}
	return plan.Vars
}

// paths is the sorted paths of a result's files.
func paths(v map[string]any) []string {
	var out []string
	files, _ := v["files"].([]any)
	for _, f := range files {
		m, _ := f.(map[string]any)
		p, _ := m["path"].(string)
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestLikeAnsible runs Ansible's own find module and nodeconverge's on one
// tree (files, a hidden file, directories, a link, a missing path) with the
// arguments node-prep roles pass (patterns, excludes, file_type, hidden,
// use_regex, comma-separated strings), and asserts the same matched and
// examined counts, msg, skipped paths and files, each with the same stat
// values (atime aside: the reads change it).
func TestLikeAnsible(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	d := filepath.Join(dir, "sysctl.d")
	must(os.MkdirAll(filepath.Join(d, "docker.io"), 0o755))
	must(os.Mkdir(filepath.Join(d, "quay.io"), 0o700))
	must(os.WriteFile(filepath.Join(d, "10-arch.conf"), []byte("fs.inotify.max_user_instances = 1024\n"), 0o644))
	must(os.WriteFile(filepath.Join(d, "99-overwrite.conf"), []byte("x\n"), 0o600))
	must(os.WriteFile(filepath.Join(d, "README"), []byte("r\n"), 0o644))
	must(os.WriteFile(filepath.Join(d, ".hidden.conf"), []byte("h\n"), 0o644))
	must(os.Symlink("10-arch.conf", filepath.Join(d, "link.conf")))
	cases := []map[string]any{
		{"paths": d},
		{"paths": d, "patterns": "*.conf"},
		{"paths": []string{d}, "patterns": []string{"*.conf"}, "hidden": true},
		{"paths": d, "patterns": "*.conf,README", "excludes": "99-*"},
		{"paths": d, "file_type": "directory", "excludes": []string{"docker.io"}},
		{"paths": d, "file_type": "link"},
		{"paths": d, "file_type": "any", "patterns": "[!1]*"},
		{"paths": d, "use_regex": true, "patterns": `\d+-.*\.conf`},
		{"paths": []string{d, filepath.Join(dir, "missing")}, "patterns": "*.conf"},
	}
	var tasks []map[string]any
	for _, c := range cases {
		tasks = append(tasks, map[string]any{"module": "find", "args": c})
	}
	b, _ := json.Marshal(tasks)
	in := filepath.Join(t.TempDir(), "tasks.json")
	must(os.WriteFile(in, b, 0o644))
	driver, _ := filepath.Abs("../edit/testdata/ansible_modules.py")
	cmd := exec.Command("/usr/bin/python3", driver, in, t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ansible find: %v\n%s", err, errb.String())
	}
	var want []map[string]any
	must(json.Unmarshal(out.Bytes(), &want))
	h := newHost(t)
	for i, c := range cases {
		got := findOf(t, transport.ReadOnly(h), c)
		for _, k := range []string{"matched", "examined", "msg"} {
			gj, _ := json.Marshal(got[k])
			wj, _ := json.Marshal(want[i][k])
			if string(gj) != string(wj) {
				t.Errorf("%v: %s: nodeconverge %s, ansible %s", c, k, gj, wj)
			}
		}
		gs, _ := got["skipped_paths"].(map[string]any)
		ws, _ := want[i]["skipped_paths"].(map[string]any)
		if len(gs) != len(ws) {
			t.Errorf("%v: skipped_paths: nodeconverge %v, ansible %v", c, gs, ws)
		}
		byPath := map[string]map[string]any{}
		for _, f := range got["files"].([]any) {
			m := f.(map[string]any)
			byPath[m["path"].(string)] = m
		}
		wfiles, _ := want[i]["files"].([]any)
		if len(wfiles) == 0 {
			t.Errorf("%v: Ansible's find found nothing: the case tests nothing", c)
		}
		if len(wfiles) != len(byPath) {
			t.Errorf("%v: files: nodeconverge %v, ansible %d files", c, paths(got), len(wfiles))
		}
		for _, wf := range wfiles {
			w := wf.(map[string]any)
			g, ok := byPath[w["path"].(string)]
			if !ok {
				t.Errorf("%v: nodeconverge lacks %s", c, w["path"])
				continue
			}
			for k, wv := range w {
				if k == "atime" {
					continue
				}
				gj, _ := json.Marshal(g[k])
				wj, _ := json.Marshal(wv)
				if k == "mtime" || k == "ctime" {
					gf, _ := g[k].(float64)
					wfl, _ := wv.(float64)
					if gf-wfl > 0.001 || wfl-gf > 0.001 {
						t.Errorf("%v: %s: %s: nodeconverge %s, ansible %s", c, w["path"], k, gj, wj)
					}
					continue
				}
				if string(gj) != string(wj) {
					t.Errorf("%v: %s: %s: nodeconverge %s, ansible %s", c, w["path"], k, gj, wj)
				}
			}
		}
	}
}

// TestPlannedState: files an earlier task plans to write in a listed
// directory are found, and one it plans to remove is not, through the
// overlay the up-front plan and check mode use; the live node's listing is
// unchanged.
func TestPlannedState(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.conf")
	if err := os.WriteFile(old, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	ov := overlay.New(transport.ReadOnly(h))
	newp := filepath.Join(dir, "new.conf")
	ov.Record([]module.FileChange{{Action: module.Create, Path: newp, After: []byte("x\n"), Mode: 0o640}, {Action: module.Delete, Path: old}})
	v := findOf(t, ov, map[string]any{"paths": dir})
	if got := paths(v); len(got) != 1 || got[0] != newp {
		t.Fatalf("planned listing: %v", got)
	}
	f := v["files"].([]any)[0].(map[string]any)
	if f["mode"] != "0640" || f["isreg"] != true || f["size"] != 2 {
		t.Errorf("planned file: %v", f)
	}
	if got := paths(findOf(t, transport.ReadOnly(h), map[string]any{"paths": dir})); len(got) != 1 || got[0] != old {
		t.Errorf("live listing: %v", got)
	}
}

// TestRefused: what find does not do is refused when the task loads.
func TestRefused(t *testing.T) {
	for _, args := range []map[string]any{
		{"paths": "/etc", "recurse": true},
		{"paths": "/etc", "depth": 2},
		{"paths": "/etc", "contains": "x"},
		{"paths": "/etc", "age": "1d"},
		{"paths": "etc"},
		{"patterns": "*"},
		{"paths": "/etc", "file_type": "socket"},
		{"paths": "/etc", "use_regex": true, "patterns": "(?=x)"},
	} {
		a := findmod.Module{}.NewArgs().(*findmod.Args)
		if err := decode(args, a); err != nil {
			t.Fatal(err)
		}
		if err := a.Validate(); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
