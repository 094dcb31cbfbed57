package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// prepUnits are the units whose states the node-prep playbooks change.
var prepUnits = []string{"gpu-exporter", "gpu-setup", "labd", "oldd", "oldd-never-installed", "containerd"}

// prepState is what a node-prep playbook leaves on a node, as comparable
// text per item: every file under the node's /etc and /root (content
// hashes, symlink targets; the backups Ansible names by time and
// nodeconverge by content are counted, not compared), its loaded kernel
// modules with the parameters they were loaded with, each unit's
// is-active and is-enabled, and how many times systemd reloaded units.
func prepState(t *testing.T, l *labtest.Lab, node string) map[string]string {
	t.Helper()
	return labNodeState(t, l, node, prepUnits)
}

// labNodeState is prepState with the units to read given, and the node's own
// sysctl values (the inotify files the lab bind-mounts over /proc/sys).
func labNodeState(t *testing.T, l *labtest.Lab, node string, units []string) map[string]string {
	t.Helper()
	root := filepath.Join(l.Dir, "nodes", node)
	out := map[string]string{}
	backups := 0
	for _, top := range []string{"etc", "root"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			key := "/" + filepath.ToSlash(rel)
			switch {
			case key == "/root/.ssh" || key == "/root/.local":
				// The lab's own: authorized_keys, the /proc/modules
				// stand-in (it names the lab's directory).
				return filepath.SkipDir
			case strings.HasSuffix(key, "~"):
				backups++
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				out[key] = "symlink:" + target
			case d.Type().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				fi, err := d.Info()
				if err != nil {
					return err
				}
				s := sha256.Sum256(b)
				out[key] = fmt.Sprintf("%04o sha256:%s", fi.Mode().Perm(), hex.EncodeToString(s[:8]))
				if strings.HasSuffix(key, ".json") || strings.HasSuffix(key, ".conf") {
					// Small text the failure message should show.
					out[key] += " " + strings.TrimSpace(string(b))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", node, err)
		}
	}
	out["backups"] = fmt.Sprint(backups)
	mods, err := os.ReadFile(filepath.Join(root, "proc", "modules"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(mods)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		params, _ := os.ReadFile(filepath.Join(root, "modules", f[0]+".params"))
		names = append(names, f[0]+" used="+f[2]+" by="+f[3]+" "+strings.Join(strings.Fields(string(params)), ","))
	}
	sort.Strings(names)
	out["modules"] = strings.Join(names, "; ")
	for _, k := range []string{"max_user_instances", "max_user_watches"} {
		v, err := os.ReadFile(filepath.Join(root, "proc", "sys", "fs", "inotify", k))
		if err != nil {
			t.Fatal(err)
		}
		out["sysctl fs.inotify."+k] = strings.TrimSpace(string(v))
	}
	for _, u := range units {
		active, _ := l.TryExec(node, "systemctl", "is-active", u)
		enabled, _ := l.TryExec(node, "systemctl", "is-enabled", u)
		out["unit "+u] = strings.TrimSpace(active) + " " + strings.TrimSpace(enabled)
	}
	reloads, _ := os.ReadFile(filepath.Join(root, "systemd", "daemon-reloads"))
	out["daemon-reloads"] = strings.TrimSpace(string(reloads))
	return out
}

// TestNodePrepModulesLikeAnsible runs each playbook of
// testdata/prep-modules (kernel modules with modprobe, line and block
// edits, units through systemd/service, stat, set_fact, assert, debug,
// copy remote_src) with ansible-playbook on one fresh lab and with
// nodeconverge on another, twice each, and asserts after each run the same
// node state (files, loaded modules and their parameters, unit states,
// daemon-reloads, and the registered values the playbook writes to
// /root/registered.json) and the same recap. gpu-node-up changes nothing
// the second time under either tool; gpu-node-down toggles a module and
// restarts a unit on every run, and must do so the same way. Before
// nodeconverge's first run, --check changes no file and starts no unit.
func TestNodePrepModulesLikeAnsible(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ansible-playbook"); err != nil {
		t.Fatalf("ansible-playbook is needed (lab/deps.sh installs it): %v", err)
	}
	books, err := filepath.Glob("testdata/prep-modules/*/site.yaml")
	if err != nil || len(books) == 0 {
		t.Fatalf("no playbooks: %v", err)
	}
	for _, pb := range books {
		pb, _ = filepath.Abs(pb)
		name := filepath.Base(filepath.Dir(pb))
		t.Run(name, func(t *testing.T) {
			la := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
			ln := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
			before := map[string]map[string]string{}
			for _, n := range ln.Nodes {
				before[n.Name] = prepState(t, ln, n.Name)
			}
			chk := nc(t, append([]string{"apply", "--check"}, labArgs(ln, pb)...)...)
			if chk.code != 2 {
				t.Errorf("--check on a fresh lab: want exit 2 (changes pending), got %s", chk)
			}
			for _, n := range ln.Nodes {
				if d := cmp.Diff(before[n.Name], prepState(t, ln, n.Name)); d != "" {
					t.Errorf("--check changed %s (-before +after):\n%s", n.Name, d)
				}
			}
			for run := 1; run <= 2; run++ {
				aout := ansiblePlaybook(t, la, pb)
				r := nc(t, append([]string{"apply"}, labArgs(ln, pb)...)...)
				nout := r.stdout + r.stderr
				arecap, nrecap := parseRecap(t, aout, true), parseRecap(t, nout, false)
				if d := cmp.Diff(arecap, nrecap); d != "" {
					t.Errorf("run %d: recaps differ (-ansible +nodeconverge):\n%s\n--- ansible\n%s\n--- nodeconverge\n%s", run, d, aout, nout)
				}
				for _, n := range la.Nodes {
					if d := cmp.Diff(prepState(t, la, n.Name), prepState(t, ln, n.Name)); d != "" {
						t.Errorf("run %d, %s: node states differ (-ansible +nodeconverge):\n%s\n--- nodeconverge\n%s", run, n.Name, d, nout)
					}
				}
				if name == "gpu-node-up" && run == 2 {
					for host, c := range nrecap {
						if c.Changed != 0 || c.Failed != 0 {
							t.Errorf("second run changed %s: %s", host, c)
						}
					}
				}
				t.Logf("%s run %d: ansible %v | nodeconverge %v", name, run, arecap, nrecap)
			}
		})
	}
}
