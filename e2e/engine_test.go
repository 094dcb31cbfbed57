package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

const copyPlay = `
- name: motd
  hosts: all
  tasks:
    - name: write motd
      copy:
        dest: /etc/containerd/motd
        content: "managed by nodeconverge on {{ inventory_hostname }}\n"
        mode: "0640"
`

// TestCopyConvergesThenIdempotent: the first run changes every node, the
// second changes none, and check mode on a drifted lab exits 2 without
// touching a byte.
func TestCopyConvergesThenIdempotent(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	pb := writePlaybook(t, copyPlay)

	check, r := checkThenApply(t, l, pb)
	wantCode(t, check, 2)
	wantCode(t, r, 0)
	if n := strings.Count(r.stdout, "changed: ["); n != 3 {
		t.Fatalf("first run: want 3 changed hosts, got %d\n%s", n, r)
	}
	for _, n := range l.Nodes {
		b, err := os.ReadFile(l.NodePath(n.Name, "/etc/containerd/motd"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "managed by nodeconverge on " + n.Name + "\n"; string(b) != want {
			t.Fatalf("%s: got %q want %q", n.Name, b, want)
		}
		st, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/motd"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o640 {
			t.Fatalf("%s: mode %v", n.Name, st.Mode())
		}
	}

	r = nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "changed: [") || !regexp.MustCompile(`changed=0`).MatchString(r.stdout) {
		t.Fatalf("second run changed something:\n%s", r)
	}

	// Drift one node, then check mode must see it, exit 2 and write nothing.
	drifted := l.Nodes[1].Name
	if err := os.WriteFile(l.NodePath(drifted, "/etc/containerd/motd"), []byte("hand edit\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]string{}
	for _, n := range l.Nodes {
		before[n.Name] = l.HashTree(t, n.Name)
	}
	r = nc(t, append([]string{"apply", "--check", "--diff"}, labArgs(l, pb)...)...)
	wantCode(t, r, 2)
	if !strings.Contains(r.stdout, "changed: ["+drifted+"]") || strings.Count(r.stdout, "changed: [") != 1 {
		t.Fatalf("check mode should report exactly %s as drifted:\n%s", drifted, r)
	}
	if !strings.Contains(r.stdout, "-hand edit") || !strings.Contains(r.stdout, "+managed by nodeconverge on "+drifted) {
		t.Fatalf("--diff should show the drift:\n%s", r)
	}
	for _, n := range l.Nodes {
		if d := cmp.Diff(before[n.Name], l.HashTree(t, n.Name)); d != "" {
			t.Fatalf("check mode changed %s (-before +after):\n%s", n.Name, d)
		}
	}
}

// TestValidateBlocksWrite: a failing validate command leaves the live file
// byte-identical and fails the task with the command's stderr.
func TestValidateBlocksWrite(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	pb := writePlaybook(t, `
- name: validated
  hosts: all
  tasks:
    - name: broken toml
      copy:
        dest: /etc/containerd/config.toml
        content: "version = 2\n[a]\n[a]\n"
        validate: "containerd --config %s config dump >/dev/null"
`)
	before := map[string]map[string]string{}
	for _, n := range l.Nodes {
		before[n.Name] = l.HashTree(t, n.Name)
	}
	for _, check := range []bool{true, false} {
		args := []string{"apply"}
		if check {
			args = append(args, "--check")
		}
		r := nc(t, append(args, labArgs(l, pb)...)...)
		wantCode(t, r, 1)
		if strings.Count(r.stdout, "failed: [") != 3 || !strings.Contains(r.stdout, "duplicated tables") {
			t.Fatalf("check=%v: want 3 failed hosts with containerd's stderr:\n%s", check, r)
		}
		for _, n := range l.Nodes {
			if d := cmp.Diff(before[n.Name], l.HashTree(t, n.Name)); d != "" {
				t.Fatalf("check=%v: failed validation changed %s:\n%s", check, n.Name, d)
			}
		}
	}
}

// TestUnreachableHost: one node's sshd is down; it is reported unreachable,
// the others converge, and the exit code is 4.
func TestUnreachableHost(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	down := l.Nodes[0].Name
	l.StopSSHD(t, down)
	r := nc(t, append([]string{"apply"}, labArgs(l, writePlaybook(t, copyPlay))...)...)
	wantCode(t, r, 4)
	if !strings.Contains(r.stdout, "unreachable: ["+down+"]") || strings.Count(r.stdout, "changed: [") != 2 {
		t.Fatalf("want %s unreachable and 2 changed:\n%s", down, r)
	}
	for _, n := range l.Nodes[1:] {
		if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/motd")); err != nil {
			t.Fatalf("%s did not converge: %v", n.Name, err)
		}
	}
}

// TestSerialStopsAfterFailure: with serial 1 a task that fails on the first
// node stops the play before the second node is touched.
func TestSerialStopsAfterFailure(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	pb := writePlaybook(t, `
- name: rolling
  hosts: all
  serial: 1
  tasks:
    - name: fails on the first node
      shell:
        cmd: "test {{ inventory_hostname }} != `+l.Nodes[0].Name+` && touch /etc/containerd/touched"
`)
	r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "failed: ["+l.Nodes[0].Name+"]") {
		t.Fatalf("first node should fail:\n%s", r)
	}
	for _, n := range l.Nodes[1:] {
		if strings.Contains(r.stdout, "["+n.Name+"]") {
			t.Fatalf("%s was touched after the first batch failed:\n%s", n.Name, r)
		}
		if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/touched")); err == nil {
			t.Fatalf("%s ran the command", n.Name)
		}
	}
}
