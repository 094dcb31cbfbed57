package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// TestFaultReadOnlyTarget (issue 11, read-only disks): on one node
// /etc/containerd is mounted read-only. The play's first task writes
// elsewhere (it succeeds), the second into /etc/containerd (it fails): that
// node is rolled back to exactly what it was and the failure names the
// read-only file system; the other node converges; the run exits 1.
func TestFaultReadOnlyTarget(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 2, Scenario: "clean", NoContainerd: true})
	ro, ok := l.Nodes[0].Name, l.Nodes[1].Name
	l.Exec(t, ro, "sh", "-c", "set -e; mount --bind /etc/containerd /etc/containerd; mount -o remount,bind,ro /etc/containerd")
	before := l.HashTree(t, ro)
	pb := writePlaybook(t, `
- name: two writes
  hosts: all
  tasks:
    - name: first, writable
      copy:
        dest: /etc/sysctl.d/90-probe.conf
        content: "fs.inotify.max_user_instances = 512\n"
    - name: second, read-only on one node
      copy:
        dest: /etc/containerd/probe.toml
        content: "# probe\n"
`)
	r, _ := ncBounded(t, 120*time.Second, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(strings.ToLower(r.stdout), "read-only file system") {
		t.Fatalf("want the failure to name the read-only file system:\n%s", r)
	}
	if d := cmp.Diff(before, l.HashTree(t, ro)); d != "" {
		t.Errorf("%s was left half-done:\n%s", ro, d)
	}
	for _, p := range []string{"/etc/sysctl.d/90-probe.conf", "/etc/containerd/probe.toml"} {
		if _, err := os.Stat(l.NodePath(ok, p)); err != nil {
			t.Errorf("%s did not converge: %v", ok, err)
		}
	}
}
