package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nodeconverge/lab/labtest"
)

// waitFile polls for a file a node writes, with a deadline; the runs under
// test signal their progress through it.
func waitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func start(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := command(args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// TestSecondRunRefusedWhileLocked: while one apply holds a node, a second
// apply refuses it, names the holder, and writes nothing.
func TestSecondRunRefusedWhileLocked(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	node := l.Nodes[0].Name
	slow := writePlaybook(t, `
- name: slow
  hosts: `+node+`
  tasks:
    - name: hold the node until released
      shell:
        cmd: "touch /etc/containerd/holding; while [ ! -e /etc/containerd/release ]; do sleep 0.05; done"
`)
	a, aout := start(t, append([]string{"apply"}, labArgs(l, slow)...)...)
	waitFile(t, l.NodePath(node, "/etc/containerd/holding"), 20*time.Second)

	before := l.HashTree(t, node)
	r := nc(t, append([]string{"apply"}, labArgs(l, writePlaybook(t, strings.ReplaceAll(copyPlay, "hosts: all", "hosts: "+node)))...)...)
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "locked by run") {
		t.Fatalf("second run should name the lock holder:\n%s", r)
	}
	after := l.HashTree(t, node)
	for p := range after {
		if before[p] != after[p] {
			t.Fatalf("second run wrote %s while the node was locked", p)
		}
	}
	if err := os.WriteFile(l.NodePath(node, "/etc/containerd/release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("first run: %v\n%s", err, aout)
	}
	// Released on exit: a third run gets the node.
	r = nc(t, append([]string{"apply"}, labArgs(l, writePlaybook(t, strings.ReplaceAll(copyPlay, "hosts: all", "hosts: "+node)))...)...)
	wantCode(t, r, 0)
}

// TestFaultKilledRunOwesHandler: a run SIGKILLed after a notifying write and
// before its handler leaves a record; the next run, which changes nothing,
// runs the handler, says why, and clears the record.
func TestFaultKilledRunOwesHandler(t *testing.T) {
	l := labtest.Start(t, labtest.Options{Nodes: 3, Scenario: "clean", NoContainerd: true})
	node := l.Nodes[0].Name
	pb := writePlaybook(t, `
- name: write then die
  hosts: `+node+`
  tasks:
    - name: config
      copy:
        dest: /etc/containerd/conf.d/50-x.toml
        content: "version = 2\n"
      notify: restart
    - name: slow step (only on the first run)
      shell:
        cmd: "touch /etc/containerd/slow; sleep 30"
        creates: /etc/containerd/slow
  handlers:
    - name: restart
      shell:
        cmd: "echo restarted >> /etc/containerd/restarts"
`)
	a, aout := start(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	waitFile(t, l.NodePath(node, "/etc/containerd/slow"), 20*time.Second)
	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err == nil {
		t.Fatalf("killed run exited 0:\n%s", aout)
	}
	if _, err := os.Stat(l.NodePath(node, "/etc/containerd/restarts")); err == nil {
		t.Fatal("the handler ran before the kill")
	}
	recs, err := filepath.Glob(l.NodePath(node, "/var/lib/nodeconverge/pending/*.json"))
	if err != nil || len(recs) != 1 {
		t.Fatalf("want one pending record after the kill, got %v (%v)", recs, err)
	}

	r := nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "owed since run") {
		t.Fatalf("the next run should say why it runs the handler:\n%s", r)
	}
	got, err := os.ReadFile(l.NodePath(node, "/etc/containerd/restarts"))
	if err != nil || string(got) != "restarted\n" {
		t.Fatalf("handler should have run exactly once: %q %v\n%s", got, err, r)
	}
	recs, err = filepath.Glob(l.NodePath(node, "/var/lib/nodeconverge/pending/*.json"))
	if err != nil || len(recs) != 0 {
		t.Fatalf("pending record not cleared: %v (%v)", recs, err)
	}
	r = nc(t, append([]string{"apply"}, labArgs(l, pb)...)...)
	wantCode(t, r, 0)
	if got, err := os.ReadFile(l.NodePath(node, "/etc/containerd/restarts")); err != nil || string(got) != "restarted\n" {
		t.Fatalf("a third run must not run the handler again: %q %v", got, err)
	}
}
