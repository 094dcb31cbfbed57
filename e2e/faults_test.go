package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"nodeconverge/lab/labtest"
)

// sessionSSHD is shell that sets $s to the pids of the sshd processes
// serving the script's own connection: its sshd ancestors except the
// topmost, which is the node's listener.
const sessionSSHD = `l=""; p=$$; while [ "$p" -gt 1 ]; do case $(cat /proc/$p/comm) in sshd*) l="$l $p";; esac; p=$(cut -d" " -f4 /proc/$p/stat); done; s=""; last=""; for x in $l; do [ -n "$last" ] && s="$s $last"; last=$x; done`

// ncBounded runs the binary like nc, but kills it after limit so a run
// that hangs fails the test instead of hanging it; it returns how long
// the run took.
func ncBounded(t *testing.T, limit time.Duration, args ...string) (result, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	r := result{code: code, stdout: out.String(), stderr: errb.String()}
	if ctx.Err() != nil {
		t.Fatalf("the run did not end within %s:\n%s", limit, r)
	}
	return r, took
}

// TestHungSessionTimesOut: during task 1, one node's session processes
// (its connection's sshd and the running command) are stopped with
// SIGSTOP while the node's sshd listener stays up. With --timeout 5s the
// run ends within the timeout plus a margin, that node fails naming the
// task and step, the other nodes run task 2, and the run exits 1.
func TestHungSessionTimesOut(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "clean", NoContainerd: true})
	hung := l.Nodes[0].Name
	pb := writePlaybook(t, `
- name: hang one node
  hosts: all
  tasks:
    - name: nap
      shell:
        cmd: 'if [ {{ inventory_hostname }} = `+hung+` ]; then `+sessionSSHD+`; kill -STOP $s; kill -STOP 0; fi; sleep 1'
    - name: write motd
      copy:
        dest: /etc/containerd/motd
        content: "after the nap\n"
`)
	const timeout = 5 * time.Second
	r, took := ncBounded(t, 150*time.Second, append([]string{"apply", "--timeout", timeout.String()}, labArgs(l, pb)...)...)
	t.Logf("run took %s", took)
	wantCode(t, r, 1)
	if limit := timeout + 25*time.Second; took > limit {
		t.Fatalf("run took %s, want under %s (timeout %s plus margin):\n%s", took, limit, timeout, r)
	}
	if !strings.Contains(r.stdout, `timed out after 5s in task "nap" at step "apply: run`) {
		t.Fatalf("want the hung node's failure to name the task and step:\n%s", r)
	}
	for _, n := range l.Nodes[1:] {
		if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/motd")); err != nil {
			t.Errorf("%s did not run task 2: %v", n.Name, err)
		}
	}
	if _, err := os.Stat(l.NodePath(hung, "/etc/containerd/motd")); err == nil {
		t.Errorf("task 2 ran on the hung node %s", hung)
	}
}

// TestLostHostIsUnreachable: a node whose connection's sshd dies during a
// task (nothing failed) is unreachable: exit 4, an ERROR line names it and
// what was lost, and its lock release is not a failure.
func TestLostHostIsUnreachable(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	lost := l.Nodes[0].Name
	pb := writePlaybook(t, `
- name: lose one node
  hosts: all
  tasks:
    - name: drop
      shell:
        cmd: 'if [ {{ inventory_hostname }} = `+lost+` ]; then `+sessionSSHD+`; kill -KILL $s; fi; true'
    - name: write motd
      copy:
        dest: /etc/containerd/motd
        content: "after the drop\n"
`)
	r, _ := ncBounded(t, 120*time.Second, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 4)
	if !strings.Contains(r.stdout, "ERROR: host "+lost+" unreachable") {
		t.Fatalf("want an ERROR line naming %s:\n%s", lost, r)
	}
	if strings.Contains(r.stdout, "release lock") {
		t.Fatalf("a lost host's lock release was reported as an error:\n%s", r)
	}
	for _, n := range l.Nodes[1:] {
		if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/motd")); err != nil {
			t.Errorf("%s did not converge: %v", n.Name, err)
		}
	}
}

// TestUnreachableFirstHostSerial: with serial: 1 and max_fail_percentage:
// 0, an unreachable first node does not stop the nightly run: the others
// converge, and the run exits 4.
func TestUnreachableFirstHostSerial(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	down := l.Nodes[0].Name
	l.StopSSHD(t, down)
	pb := writePlaybook(t, `
- name: rolling
  hosts: all
  serial: 1
  max_fail_percentage: 0
  tasks:
    - name: write motd
      copy:
        dest: /etc/containerd/motd
        content: "rolled\n"
`)
	r, _ := ncBounded(t, 120*time.Second, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 4)
	for _, n := range l.Nodes[1:] {
		if _, err := os.Stat(l.NodePath(n.Name, "/etc/containerd/motd")); err != nil {
			t.Errorf("%s did not converge: %v", n.Name, err)
		}
	}
	if !strings.Contains(r.stdout, "ERROR: host "+down+" unreachable") {
		t.Fatalf("want an ERROR line naming %s:\n%s", down, r)
	}
}
