package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nodeconverge/lab/labtest"
)

// holdRestart replaces the node's systemctl stand-in with a wrapper whose
// `restart` stops containerd, creates /etc/containerd/held and waits while
// /etc/containerd/hold exists before it starts containerd again: the test
// decides when the restart, mid-way with containerd stopped, goes on.
func holdRestart(t *testing.T, l *labtest.Lab, node string) {
	t.Helper()
	sc := l.NodePath(node, "/usr/local/sbin/systemctl")
	if err := os.Rename(sc, sc+".lab"); err != nil {
		t.Fatal(err)
	}
	wrapper := `#!/bin/sh
if [ "$1" = restart ] && [ -e /etc/containerd/hold ]; then
	/usr/local/sbin/systemctl.lab stop "$2" || exit 1
	touch /etc/containerd/held
	while [ -e /etc/containerd/hold ]; do sleep 0.05; done
	exec /usr/local/sbin/systemctl.lab start "$2"
fi
exec /usr/local/sbin/systemctl.lab "$@"
`
	if err := os.WriteFile(sc, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.NodePath(node, "/etc/containerd/hold"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// watched is a controller run whose stderr lines are watched as they come.
type watched struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	mu   sync.Mutex
	errs strings.Builder
	// said is closed when stderr carries the awaited line.
	said   chan struct{}
	exited chan struct{}
	err    error
}

// startWatched starts the binary and closes said when a stderr line
// contains line.
func startWatched(t *testing.T, line string, args ...string) *watched {
	t.Helper()
	w := &watched{cmd: command(args...), said: make(chan struct{}), exited: make(chan struct{})}
	w.cmd.Stdout = &w.out
	pipe, err := w.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		once := false
		for sc.Scan() {
			w.mu.Lock()
			w.errs.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			if !once && strings.Contains(sc.Text(), line) {
				once = true
				close(w.said)
			}
		}
	}()
	go func() {
		<-done // Wait closes the pipe: read it to the end first.
		w.err = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			if err := w.cmd.Process.Kill(); err != nil {
				t.Logf("kill the controller: %v", err)
			}
			<-w.exited
		}
	})
	return w
}

// result waits, at most limit, for the run to end.
func (w *watched) result(t *testing.T, limit time.Duration) result {
	t.Helper()
	select {
	case <-w.exited:
	case <-time.After(limit):
		t.Fatalf("the controller did not exit within %s of the signal", limit)
	}
	code := 0
	if w.err != nil {
		ee, ok := w.err.(*exec.ExitError)
		if !ok {
			t.Fatalf("wait: %v", w.err)
		}
		code = ee.ExitCode()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return result{code: code, stdout: w.out.String(), stderr: w.errs.String()}
}

const restartPlay = `
- name: change and restart
  hosts: all
  tasks:
    - name: motd
      copy:
        dest: /etc/containerd/motd
        content: "restarted for this\n"
      notify: restart containerd
  handlers:
    - name: restart containerd
      containerd_restart:
        runtimes: []
        timeout: 30s
`

// wantHealthy fails unless the node's containerd is active with the CRI
// plugin ok.
func wantHealthy(t *testing.T, l *labtest.Lab, node string, r result) {
	t.Helper()
	if st := strings.TrimSpace(l.Exec(t, node, "sh", "-c", "systemctl is-active containerd || true")); st != "active" {
		t.Fatalf("containerd is %s after the interrupted run:\n%s", st, r)
	}
	if plugins := l.Exec(t, node, "ctr", "plugins", "ls"); !criOK.MatchString(plugins) {
		t.Fatalf("CRI not ok after the interrupted run:\n%s\n%s", plugins, r)
	}
}

// TestFaultSIGTERMDuringRestart: the controller gets SIGTERM while the
// handler's restart has containerd stopped (held there by a systemctl
// wrapper until the signal was taken). The handler finishes: containerd
// runs with the CRI plugin ok, the run exits 143, and the recap says the
// host's in-flight handler finished. With the restart held past
// --interrupt-grace, the handler is cut short: the host is rolled back,
// containerd started again, the recap says so, and the restart stays owed.
func TestFaultSIGTERMDuringRestart(t *testing.T) {
	for _, g := range restartGenerations {
		t.Run(g.name, func(t *testing.T) {
			t.Run("finishes", func(t *testing.T) {
				l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
				node := l.Nodes[0].Name
				holdRestart(t, l, node)
				w := startWatched(t, "nodeconverge: SIGTERM:", append([]string{"apply"}, labArgs(l, writePlaybook(t, restartPlay))...)...)
				waitFile(t, l.NodePath(node, "/etc/containerd/held"), 2*time.Minute)
				if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				// The restart goes on only once the controller took the
				// signal (or exited: the defect this test is for).
				select {
				case <-w.said:
				case <-w.exited:
				case <-time.After(time.Minute):
					t.Fatal("the controller neither took SIGTERM nor exited within a minute")
				}
				if err := os.Remove(l.NodePath(node, "/etc/containerd/hold")); err != nil {
					t.Fatal(err)
				}
				r := w.result(t, 3*time.Minute)
				t.Logf("%s", r)
				wantHealthy(t, l, node, r)
				wantCode(t, r, 143)
				want := "interrupted: handler \"restart containerd\" in flight at the signal finished: restarted containerd"
				if !strings.Contains(r.stdout, want) {
					t.Fatalf("want the host's state in the recap (%q):\n%s", want, r)
				}
				if recs, err := filepath.Glob(l.NodePath(node, "/var/lib/nodeconverge/pending/*.json")); err != nil || len(recs) != 0 {
					t.Fatalf("the finished restart is still owed: %v (%v)", recs, err)
				}
			})
			t.Run("cut short", func(t *testing.T) {
				l := labtest.Start(t, labtest.Options{Nodes: 1, Scenario: "clean", ContainerdBin: labtest.Containerd(t, g.gen)})
				node := l.Nodes[0].Name
				holdRestart(t, l, node)
				w := startWatched(t, "nodeconverge: SIGTERM:", append([]string{"apply", "--interrupt-grace", "5s"}, labArgs(l, writePlaybook(t, restartPlay))...)...)
				waitFile(t, l.NodePath(node, "/etc/containerd/held"), 2*time.Minute)
				if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				// The hold is never released: the grace runs out.
				r := w.result(t, 3*time.Minute)
				t.Logf("%s", r)
				wantHealthy(t, l, node, r)
				wantCode(t, r, 143)
				for _, want := range []string{
					"interrupted: handler \"restart containerd\" in flight at the signal failed",
					"service restored: containerd active",
					"handler \"restart containerd\" owed",
				} {
					if !strings.Contains(r.stdout, want) {
						t.Fatalf("want %q in the recap:\n%s", want, r)
					}
				}
				if _, err := os.Stat(l.NodePath(node, "/etc/containerd/motd")); !os.IsNotExist(err) {
					t.Fatalf("the cut-short host was not rolled back (motd: %v):\n%s", err, r)
				}
			})
		})
	}
}
