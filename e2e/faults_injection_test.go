package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"nodeconverge/lab/labtest"
)

// TestFaultInjection (issue 11 item 5): a variable holding shell syntax is
// data wherever it is substituted: `command` runs no shell (its cmd is split
// into argv), and the `shell` module quotes what it substitutes. None of
// the probe's files is created on the node, and the value arrives intact.
func TestFaultInjection(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", NoContainerd: true})
	n := l.Nodes[0].Name
	label := "$(touch /etc/containerd/a)`touch /etc/containerd/b`; touch /etc/containerd/c"
	pb := writePlaybook(t, `
- name: hostile values
  hosts: all
  vars:
    label: '`+label+`'
  tasks:
    - name: command echoes it
      command:
        cmd: "echo {{ label }}"
    - name: shell writes it
      shell:
        cmd: "printf '%s\n' {{ label }} > /etc/containerd/label.txt"
`)
	r, _ := ncBounded(t, 120*time.Second, append([]string{"apply", "-v"}, labArgs(l, pb)...)...)
	wantCode(t, r, 0)
	for _, f := range []string{"a", "b", "c"} {
		if _, err := os.Stat(l.NodePath(n, "/etc/containerd/"+f)); err == nil {
			t.Errorf("/etc/containerd/%s was created on %s: a value ran as shell", f, n)
		}
	}
	b, err := os.ReadFile(l.NodePath(n, "/etc/containerd/label.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSuffix(string(b), "\n"); got != label {
		t.Errorf("shell received %q, want the value intact %q", got, label)
	}
}
