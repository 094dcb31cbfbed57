package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"nodeconverge/lab/labtest"
)

// criOK matches the CRI plugin's row of `ctr plugins ls` with status ok.
var criOK = regexp.MustCompile(`(?m)^io\.containerd\.grpc\.v1\s+cri\s+\S+\s+ok\s*$`)

// daemonPID is the lab's record of a node's containerd process.
func daemonPID(t *testing.T, l *labtest.Lab, node string) string {
	t.Helper()
	b, err := os.ReadFile(l.Node(t, node).Root + "/containerd.pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// TestShippedPlaybookRestartsOnce: the shipped playbook on the incident lab
// writes the inotify limits and raises the live values, restarts containerd
// once per node with the CRI plugin healthy and the runtimes effective, and
// a second run restarts nothing.
func TestShippedPlaybookRestartsOnce(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "incident"})
	before := map[string]string{}
	for _, n := range l.Nodes {
		before[n.Name] = daemonPID(t, l, n.Name)
	}
	check, r := checkThenApply(t, l, shippedPlaybook())
	wantCode(t, check, 2)
	wantCode(t, r, 0)
	if got := strings.Count(check.stdout, "it would restart containerd"); got != 4 {
		t.Fatalf("check mode should say each node would restart (4), got %d:\n%s", got, check)
	}
	if got := strings.Count(r.stdout, "restarted containerd"); got != 4 {
		t.Fatalf("want one restart per node (4), got %d:\n%s", got, r)
	}
	after := map[string]string{}
	for _, n := range l.Nodes {
		after[n.Name] = daemonPID(t, l, n.Name)
		if after[n.Name] == "" || after[n.Name] == before[n.Name] {
			t.Errorf("%s: containerd pid %q -> %q: not restarted", n.Name, before[n.Name], after[n.Name])
		}
		if got := strings.TrimSpace(l.Exec(t, n.Name, "cat", "/proc/sys/fs/inotify/max_user_instances")); got != "8192" {
			t.Errorf("%s: live max_user_instances %s", n.Name, got)
		}
		if _, err := os.Stat(l.NodePath(n.Name, "/etc/sysctl.d/99-inotify.conf")); err != nil {
			t.Errorf("%s: limits file: %v", n.Name, err)
		}
		if plugins := l.Exec(t, n.Name, "ctr", "plugins", "ls"); !criOK.MatchString(plugins) {
			t.Errorf("%s: CRI plugin not ok:\n%s", n.Name, plugins)
		}
	}
	r = nc(t, append([]string{"apply"}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "HANDLER") || strings.Contains(r.stdout, "changed: [") {
		t.Fatalf("second run must restart nothing:\n%s", r)
	}
	for _, n := range l.Nodes {
		if p := daemonPID(t, l, n.Name); p != after[n.Name] {
			t.Errorf("%s: containerd restarted by the second run (%s -> %s)", n.Name, after[n.Name], p)
		}
	}

	// A nightly drift run on converged nodes: one TCP connection per host
	// and at most 3 SSH sessions (issue 6's target; it is 2 today: read
	// ahead, ablation dump), counted by each node's sshd.
	for _, n := range l.Nodes {
		if err := os.Truncate(l.Node(t, n.Name).Root+"/sshd.log", 0); err != nil {
			t.Fatal(err)
		}
	}
	r = nc(t, append([]string{"apply", "--check"}, labArgs(l, shippedPlaybook())...)...)
	wantCode(t, r, 0)
	for _, n := range l.Nodes {
		b, err := os.ReadFile(l.Node(t, n.Name).Root + "/sshd.log")
		if err != nil {
			t.Fatal(err)
		}
		conns, sessions := strings.Count(string(b), "Connection from"), strings.Count(string(b), "session: command")
		if conns != 1 || sessions > 3 {
			t.Errorf("%s: drift run used %d connections and %d sessions; want 1 and at most 3", n.Name, conns, sessions)
		}
	}
}

// TestFaultFailedHealthGateRollsBack: a change after which the CRI plugin cannot
// load is rolled back on that node, containerd restarted on the old files,
// the node marked failed with the plugin's error, and with serial 1 the next
// node is never touched.
func TestFaultFailedHealthGateRollsBack(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean"})
	first, second := l.Nodes[0].Name, l.Nodes[1].Name
	secondBefore := l.HashTree(t, second)
	firstBefore := l.HashTree(t, first)
	pb := writePlaybook(t, `
- name: bad change
  hosts: all
  serial: 1
  max_fail_percentage: 0
  tasks:
    - name: a default runtime that does not exist
      copy:
        dest: /etc/containerd/config.toml
        content: |
          version = 2
          [plugins."io.containerd.grpc.v1.cri".containerd]
            default_runtime_name = "nvidia"
      notify: restart containerd
  handlers:
    - name: restart containerd
      containerd_restart:
        runtimes: []
`)
	r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "failed: ["+first+"]") || !strings.Contains(r.stdout, "nvidia") || !strings.Contains(strings.ToLower(r.stdout), "roll") {
		t.Fatalf("want the first node failed with the plugin error and the rollback reported:\n%s", r)
	}
	if strings.Contains(r.stdout, "["+second+"]") {
		t.Fatalf("second node touched after the first failed:\n%s", r)
	}
	if d := cmp.Diff(secondBefore, l.HashTree(t, second)); d != "" {
		t.Fatalf("second node's files changed:\n%s", d)
	}
	if d := cmp.Diff(firstBefore, l.HashTree(t, first)); d != "" {
		t.Fatalf("first node not rolled back to its files:\n%s", d)
	}
	if st := strings.TrimSpace(l.Exec(t, first, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
		t.Fatalf("first node's containerd is %s after the rollback restart", st)
	}
	if plugins := l.Exec(t, first, "ctr", "plugins", "ls"); !criOK.MatchString(plugins) {
		t.Fatalf("CRI still failing after rollback:\n%s", plugins)
	}
}
