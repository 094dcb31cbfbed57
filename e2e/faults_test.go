package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

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

// TestFaultHungSessionTimesOut: during task 1, one node's session processes
// (its connection's sshd and the running command) are stopped with
// SIGSTOP while the node's sshd listener stays up. With --timeout 20s the
// run ends (within ncBounded's limit), that node fails naming the
// task and step, the other nodes run task 2, and the run exits 1.
func TestFaultHungSessionTimesOut(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 4, Scenario: "clean", NoContainerd: true})
	hung := l.Nodes[0].Name
	pb := writePlaybook(t, `
- name: hang one node
  hosts: all
  tasks:
    - name: nap
      shell:
        cmd: 'if [ {{ inventory_hostname }} = `+hung+` ]; then `+sessionSSHD+`; echo $$ $s > /etc/containerd/hung.pids; kill -STOP $s; kill -STOP 0; fi; sleep 1'
    - name: write motd
      copy:
        dest: /etc/containerd/motd
        content: "after the nap\n"
`)
	// The timeout is generous for the healthy nodes of a loaded machine;
	// the hung node would otherwise never end: ncBounded fails the test
	// if the run does not end within its limit.
	const timeout = 20 * time.Second
	r, took := ncBounded(t, 120*time.Second, append([]string{"apply", "--timeout", timeout.String()}, labArgs(l, pb)...)...)
	t.Logf("run took %s", took)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, `timed out after 20s in task "nap" at step "apply: run`) {
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
	// The stopped command and its connection's sshd processes end: they
	// were sent TERM and CONT over a fresh connection. Their exit follows
	// the signal, so it is waited for, with a bound.
	b, err := os.ReadFile(l.NodePath(hung, "/etc/containerd/hung.pids"))
	if err != nil {
		t.Fatal(err)
	}
	pids := strings.Fields(string(b))
	if len(pids) < 2 {
		t.Fatalf("hung.pids = %q, want the command's and its sshd session's pids", b)
	}
	for _, pid := range pids {
		if err := waitExit(pid, 10*time.Second); err != nil {
			st, _ := os.ReadFile("/proc/" + pid + "/stat")
			t.Fatalf("process %s of the hung session: %v: %s", pid, err, st)
		}
	}
}

// TestFaultLostHostIsUnreachable: a node whose connection's sshd dies during a
// task (nothing failed) is unreachable: exit 4, an ERROR line names it and
// what was lost, and its lock release is not a failure.
func TestFaultLostHostIsUnreachable(t *testing.T) {
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

// TestFaultUnreachableFirstHostSerial: with serial: 1 and max_fail_percentage:
// 0, an unreachable first node does not stop the nightly run: the others
// converge, and the run exits 4.
func TestFaultUnreachableFirstHostSerial(t *testing.T) {
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

// waitExit waits, at most limit, for process pid (not a child) to exit:
// a pidfd becomes readable when its process exits.
func waitExit(pid string, limit time.Duration) error {
	n, err := strconv.Atoi(pid)
	if err != nil {
		return fmt.Errorf("pid %q: %w", pid, err)
	}
	fd, err := unix.PidfdOpen(n, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", n, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		k, err := unix.Poll(fds, int(limit.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfd %d: %w", n, err)
		}
		if k == 0 {
			return fmt.Errorf("still running %s after the run", limit)
		}
		return nil
	}
}

// TestFaultHungCheckTimesOut: in check mode, a node whose validation command
// hangs (like a containerd that hangs in `config dump`) is failed at the
// timeout, and the other nodes are planned: the run ends (within
// ncBounded's limit) and changes nothing.
func TestFaultHungCheckTimesOut(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	hung := l.Nodes[0].Name
	if err := os.WriteFile(l.NodePath(hung, "/etc/containerd/hang"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pb := writePlaybook(t, `
- name: validated
  hosts: all
  tasks:
    - name: write motd
      copy:
        dest: /etc/containerd/motd
        content: "checked\n"
        validate: "sh -c 'if [ -e /etc/containerd/hang ]; then sleep 600; fi' %s"
`)
	before := map[string]map[string]string{}
	for _, n := range l.Nodes {
		before[n.Name] = l.HashTree(t, n.Name)
	}
	const timeout = 20 * time.Second
	r, took := ncBounded(t, 120*time.Second, append([]string{"apply", "--check", "--timeout", timeout.String()}, labArgs(l, pb)...)...)
	t.Logf("run took %s", took)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, `timed out after 20s in task "write motd" at step "check"`) {
		t.Fatalf("want the hung node's failure to name the task and step:\n%s", r)
	}
	for _, n := range l.Nodes[1:] {
		if !strings.Contains(r.stdout, "changed: ["+n.Name+"]") {
			t.Errorf("%s was not planned:\n%s", n.Name, r)
		}
	}
	for _, n := range l.Nodes {
		if d := cmp.Diff(before[n.Name], l.HashTree(t, n.Name)); d != "" {
			t.Errorf("check mode changed %s:\n%s", n.Name, d)
		}
	}
}
