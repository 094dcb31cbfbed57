package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/transport"
)

// argvConn runs the script with an arbitrary command line, so a test can
// put a process of its choosing between the controller and the script's
// shell, the way sshd sits there on a real node.
type argvConn struct{ argv []string }

func (c argvConn) Run(ctx context.Context, script string, stdin []byte) (*transport.CmdResult, error) {
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Stdin = io.MultiReader(strings.NewReader(script), bytes.NewReader(stdin))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := &transport.CmdResult{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ExitCode = ee.ExitCode()
	} else if err != nil {
		return nil, fmt.Errorf("run %v: %w", c.argv, err)
	}
	return res, nil
}
func (argvConn) Name() string { return "node1" }
func (argvConn) Close() error { return nil }

// fakeSSHD copies the shell under the name sshd-session, so the lock's walk
// up the process tree finds it as the connection process. It runs the
// script's shell as a child (not exec) and exits after one round trip, like
// the sshd of a connection that closed.
func fakeSSHD(t *testing.T) argvConn {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sshd-session")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return argvConn{argv: []string{p, "-c", "sh -s; exit $?"}}
}

func TestLockExclusive(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	h1 := newTestHost(t, "sh", HostOptions{RunID: "run-1", StateDir: state})
	h2 := newTestHost(t, "bash", HostOptions{RunID: "run-2", StateDir: state})
	owner := NewLockOwner("run-1")
	l1, err := h1.Lock(ctx, true, owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(l1.TookOver) != 0 || l1.Note() != "" {
		t.Errorf("fresh lock took over %v", l1.TookOver)
	}
	// On a local connection the holder is the controller: this test.
	if l1.Owner.HolderPID != os.Getpid() || l1.Owner.RunID != "run-1" || l1.Owner.PID != os.Getpid() {
		t.Errorf("owner = %+v, want holder and pid %d", l1.Owner, os.Getpid())
	}
	_, err = h2.Lock(ctx, true, NewLockOwner("run-2"))
	var held *LockHeldError
	if !errors.As(err, &held) {
		t.Fatalf("second lock: err = %v, want *LockHeldError", err)
	}
	host, _ := os.Hostname()
	wantMsg := fmt.Sprintf("node node-bash is locked by run run-1 from host %s (pid %d) since %s", host, os.Getpid(), owner.Since.Format("2006-01-02T15:04:05Z"))
	if !strings.HasPrefix(err.Error(), wantMsg) {
		t.Errorf("held error = %q, want prefix %q", err, wantMsg)
	}
	// A shared lock is refused too while an exclusive one is held.
	if _, err := h2.Lock(ctx, false, NewLockOwner("run-2")); !errors.As(err, &held) {
		t.Errorf("shared under exclusive: err = %v", err)
	}
	// The same run may take its lock again.
	if _, err := h1.Lock(ctx, true, owner); err != nil {
		t.Errorf("re-lock by the holder: %v", err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := h2.Lock(ctx, true, NewLockOwner("run-2"))
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	// run-1 no longer holds it: its release must not free run-2's lock.
	if err := l1.Release(ctx); err == nil || !strings.Contains(err.Error(), "held by run run-2") {
		t.Errorf("second release, lock now run-2's: err = %v", err)
	}
	if _, err := h1.Lock(ctx, true, owner); !errors.As(err, &held) || held.Owner.RunID != "run-2" {
		t.Errorf("lock held by run-2: err = %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLockShared(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	host := func(run string) *Host { return newTestHost(t, "sh", HostOptions{RunID: run, StateDir: state}) }
	a, err := host("a").Lock(ctx, false, NewLockOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := host("b").Lock(ctx, false, NewLockOwner("b"))
	if err != nil {
		t.Fatalf("two shared locks: %v", err)
	}
	var held *LockHeldError
	if _, err := host("c").Lock(ctx, true, NewLockOwner("c")); !errors.As(err, &held) || !held.Owner.Shared {
		t.Fatalf("exclusive under shared: err = %v", err)
	}
	if !strings.Contains(held.Error(), "locked (shared) by run ") {
		t.Errorf("message %q does not say shared", held.Error())
	}
	for _, l := range []*NodeLock{a, b} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := host("c").Lock(ctx, true, NewLockOwner("c")); err != nil {
		t.Errorf("exclusive after shared released: %v", err)
	}
}

func TestLockTakeoverWhenConnectionGone(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	sshd := fakeSSHD(t)
	dead := NewHost(sshd, HostOptions{RunID: "killed-run", StateDir: state})
	l, err := dead.Lock(ctx, true, NewLockOwner("killed-run"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Owner.HolderComm != "sshd-session" || l.Owner.HolderPID == os.Getpid() || l.Owner.HolderPID == 0 {
		t.Fatalf("holder = %d %q, want the fake sshd-session", l.Owner.HolderPID, l.Owner.HolderComm)
	}
	// The fake sshd exited with its round trip, as a real one does when the
	// controller is SIGKILLed and its connection drops.
	h := newTestHost(t, "sh", HostOptions{RunID: "next-run", StateDir: state})
	l2, err := h.Lock(ctx, true, NewLockOwner("next-run"))
	if err != nil {
		t.Fatalf("lock after the holder died: %v", err)
	}
	if len(l2.TookOver) != 1 || l2.TookOver[0].RunID != "killed-run" || l2.TookOver[0].HolderPID != l.Owner.HolderPID {
		t.Fatalf("took over %+v, want killed-run", l2.TookOver)
	}
	if n := l2.Note(); !strings.Contains(n, "took over the lock of node node-sh from run killed-run") || !strings.Contains(n, "is gone") {
		t.Errorf("note = %q", n)
	}
	// The dead run's release (if it ever came back) must not free it.
	if err := l.Release(ctx); err == nil || !strings.Contains(err.Error(), "held by run next-run") {
		t.Errorf("release of a taken-over lock: err = %v", err)
	}
}

func TestLockRefusesForeignRunID(t *testing.T) {
	h := newTestHost(t, "sh", HostOptions{RunID: "r1", StateDir: filepath.Join(t.TempDir(), "state")})
	if _, err := h.Lock(context.Background(), true, NewLockOwner("r2")); err == nil {
		t.Fatal("lock with another run's owner succeeded")
	}
}

// holderConn is a connection that names its holder, as a local or host-root
// connection does, even though an sshd-named process sits above the
// script's shell (an operator who started pull mode from an SSH session).
type holderConn struct{ argvConn }

func (holderConn) HolderPID() int { return os.Getpid() }

// TestLockHolderNamedByConnection: a connection that names its holder ties
// the lock to that process, not to the nearest sshd: the fake sshd exits
// after the round trip, yet the lock stays held while this (controller)
// process lives.
func TestLockHolderNamedByConnection(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	c := holderConn{fakeSSHD(t)}
	h := NewHost(c, HostOptions{RunID: "pull-run", StateDir: state})
	l, err := h.Lock(ctx, true, NewLockOwner("pull-run"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Owner.HolderPID != os.Getpid() {
		t.Fatalf("holder = %d %q, want this process %d", l.Owner.HolderPID, l.Owner.HolderComm, os.Getpid())
	}
	other := newTestHost(t, "sh", HostOptions{RunID: "other-run", StateDir: state})
	_, err = other.Lock(ctx, true, NewLockOwner("other-run"))
	var held *LockHeldError
	if !errors.As(err, &held) || held.Owner.RunID != "pull-run" {
		t.Fatalf("second run got %v, want the lock held by pull-run", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockAndPrefetch: the lock and the run's first read share a round trip;
// a refused lock reads nothing; the release removes the pending records of
// the handlers the run served, and only while the lock is still the run's.
func TestLockAndPrefetch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(file, []byte("version = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	q := transport.Query{Files: []string{file}, Globs: []string{filepath.Join(dir, "*.toml")}, Cmds: []transport.Cmd{{Argv: []string{"echo", "hi"}}}}
	for _, sh := range []string{"sh", "bash"} {
		t.Run(sh, func(t *testing.T) {
			h1 := newTestHost(t, sh, HostOptions{RunID: "run-1", StateDir: state})
			l, err := h1.LockAndPrefetch(ctx, true, NewLockOwner("run-1"), q)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := h1.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if n := h1.Stats().RoundTrips; n != 1 {
				t.Errorf("lock and query took %d round trips, want 1", n)
			}
			if got := string(snap.File(file).Content); got != "version = 2\n" {
				t.Errorf("prefetched %q", got)
			}
			if got := snap.Globs[q.Globs[0]]; len(got) != 1 || got[0] != file {
				t.Errorf("glob matched %v", got)
			}
			if c := snap.Cmds[0]; c == nil || string(c.Stdout) != "hi\n" {
				t.Errorf("command answered %+v", c)
			}

			// A second run is refused and reads nothing.
			h2 := newTestHost(t, sh, HostOptions{RunID: "run-2", StateDir: state})
			_, err = h2.LockAndPrefetch(ctx, true, NewLockOwner("run-2"), q)
			var held *LockHeldError
			if !errors.As(err, &held) || held.Owner.RunID != "run-1" {
				t.Fatalf("second run: err = %v, want held by run-1", err)
			}
			if _, ok := h2.cache.lookup(q); ok {
				t.Error("a refused lock filled the read cache")
			}

			// Records of served handlers go with the release; others stay.
			served, owed := PendingPath(state, "restart containerd"), PendingPath(state, "reload sysctl")
			for _, p := range []string{served, owed} {
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// run-2's release is refused and must not remove them.
			l2 := &NodeLock{h: h2, name: "x"}
			if err := l2.Release(ctx, "restart containerd"); err == nil {
				t.Error("release of a lock held by another run succeeded")
			}
			if _, err := os.Stat(served); err != nil {
				t.Errorf("a refused release removed a record: %v", err)
			}
			if err := l.Release(ctx, "restart containerd"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(served); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("served handler's record after release: %v", err)
			}
			if _, err := os.Stat(owed); err != nil {
				t.Errorf("owed handler's record after release: %v", err)
			}
			if err := os.Remove(owed); err != nil {
				t.Fatal(err)
			}
		})
	}
}
