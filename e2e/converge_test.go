package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// brokenDropin is a drop-in containerd refuses to load (a table declared
// twice), the incident's first wrong turn.
const brokenDropin = "version = 2\\n[a]\\n[a]\\n"

// TestNoPartialConverge: the first task would write; the second would be
// refused on the files as the first leaves them (its candidate fails
// containerd's own validation). On that node nothing is written, the output
// names the second task and containerd's reason, and the exit code is 1;
// the other node, where the second task has nothing to do, converges.
func TestNoPartialConverge(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
	refused, other := l.Nodes[0].Name, l.Nodes[1].Name
	// On the other node the drop-in already holds these bytes, so the
	// second task changes nothing there and validates nothing.
	if err := os.MkdirAll(l.NodePath(other, "/etc/containerd/conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.NodePath(other, "/etc/containerd/conf.d/50-broken.toml"), []byte("version = 2\n[a]\n[a]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pb := writePlaybook(t, `
- name: two tasks
  hosts: all
  tasks:
    - name: write motd
      copy:
        dest: /etc/containerd/motd
        content: "managed\n"
    - name: broken drop-in
      copy:
        dest: /etc/containerd/conf.d/50-broken.toml
        content: "`+brokenDropin+`"
        validate: "containerd --config %s config dump >/dev/null"
`)
	before := l.HashTree(t, refused)
	r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	if d := cmp.Diff(before, l.HashTree(t, refused)); d != "" {
		t.Fatalf("%s was changed although a later task is refused (-before +after):\n%s\n%s", refused, d, r)
	}
	if !strings.Contains(r.stdout, "failed: ["+refused+"]") || !strings.Contains(r.stdout, `task "broken drop-in" (copy) would fail`) ||
		!strings.Contains(r.stdout, "duplicated tables") || !strings.Contains(r.stdout, "nothing was written on this host") {
		t.Fatalf("want %s failed, naming the task and containerd's reason:\n%s", refused, r)
	}
	b, err := os.ReadFile(l.NodePath(other, "/etc/containerd/motd"))
	if err != nil || string(b) != "managed\n" {
		t.Fatalf("%s did not converge: %q, %v\n%s", other, b, err, r)
	}
}

// TestFailureAfterWriteRollsBack: a command fails on one node after a copy
// wrote there; with max_fail_percentage 0 the play stops, so the other node,
// which ran only part of the play, is rolled back too. Both nodes end
// byte-identical to where they started, and the output says what was
// restored.
func TestFailureAfterWriteRollsBack(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
	failing, other := l.Nodes[0].Name, l.Nodes[1].Name
	before := map[string]map[string]string{}
	for _, n := range l.Nodes {
		before[n.Name] = l.HashTree(t, n.Name)
	}
	pb := writePlaybook(t, `
- name: stops half way
  hosts: all
  max_fail_percentage: 0
  tasks:
    - name: change the main config
      copy:
        dest: /etc/containerd/config.toml
        content: "version = 2\n"
    - name: a probe that fails on one node
      command:
        cmd: "test {{ inventory_hostname }} != `+failing+`"
    - name: write motd
      copy:
        dest: /etc/containerd/motd
        content: "managed\n"
`)
	r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	for _, n := range l.Nodes {
		if d := cmp.Diff(before[n.Name], l.HashTree(t, n.Name)); d != "" {
			t.Errorf("%s not rolled back (-before +after):\n%s", n.Name, d)
		}
	}
	if !strings.Contains(r.stdout, "failed: ["+failing+"]") || !strings.Contains(r.stdout, "failed: ["+other+"]") ||
		strings.Count(r.stdout, "rolled back this host's run: restored /etc/containerd/config.toml") != 2 {
		t.Fatalf("want both nodes failed and their rollback reported:\n%s", r)
	}
}

// TestSavedPlanRelativeSrc: a saved plan of copy with a relative src
// applies and re-checks against the src next to the playbook, from any
// working directory.
func TestSavedPlanRelativeSrc(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "src.txt"), []byte("from src\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pb := filepath.Join(dir, "play.yaml")
	if err := os.WriteFile(pb, []byte("- hosts: all\n  tasks:\n    - name: from src\n      copy:\n        dest: /etc/containerd/motd\n        src: src.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	wantCode(t, nc(t, append([]string{"apply", "--check", "--out", planFile}, labArgs(l, pb)...)...), 2)
	r := nc(t, append([]string{"apply"}, labArgs(l, planFile)...)...)
	wantCode(t, r, 0)
	node := l.Nodes[0].Name
	if b, err := os.ReadFile(l.NodePath(node, "/etc/containerd/motd")); err != nil || string(b) != "from src\n" {
		t.Fatalf("motd = %q, %v\n%s", b, err, r)
	}
	wantCode(t, nc(t, append([]string{"apply", "--check"}, labArgs(l, pb)...)...), 0)
}
