package localconn

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/engine/transport"
)

// TestDialRefusesBadHostRoot: a host root without a shell, or whose
// /proc is another PID namespace's, is refused before any script runs.
func TestDialRefusesBadHostRoot(t *testing.T) {
	noShell := t.TempDir()
	if _, err := Dial("n1", Options{Root: noShell}); err == nil || !strings.Contains(err.Error(), "has no /bin/sh") {
		t.Errorf("root without /bin/sh: err = %v", err)
	}
	otherPID := t.TempDir()
	for _, d := range []string{"bin", "proc"} {
		if err := os.Mkdir(filepath.Join(otherPID, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/bin/sh", filepath.Join(otherPID, "bin/sh")); err != nil {
		t.Fatal(err)
	}
	// What a container's own /proc shows a process that is PID 1 there.
	if err := os.Symlink("1", filepath.Join(otherPID, "proc/self")); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs root (chroot), as CI runs it")
	}
	if _, err := Dial("n1", Options{Root: otherPID}); err == nil || !strings.Contains(err.Error(), "hostPID") {
		t.Errorf("root with another PID namespace's /proc: err = %v", err)
	}
	// The machine's own root is a valid host root: scripts run chrooted
	// into it, and the node lock names this process.
	c, err := Dial("n1", Options{Root: "/"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(context.Background(), "readlink /proc/self/root; echo $PATH", nil)
	if err != nil || !res.OK() {
		t.Fatalf("run: %v %+v", err, res)
	}
	if got := string(res.Stdout); got != "/\n"+NodePath+"\n" {
		t.Errorf("chrooted shell printed %q", got)
	}
}

// TestDialSocketLocal: pull mode reaches the node's socket directly, and
// under a host root the path is the root's.
func TestDialSocketLocal(t *testing.T) {
	root := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(root, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	l := &local{name: "n1", shell: "sh", root: root}
	c, err := l.DialSocket(context.Background(), "/d.sock")
	if err != nil {
		t.Fatalf("DialSocket under the root: %v", err)
	}
	b := make([]byte, 2)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "hi" {
		t.Errorf("read %q, %v", b, err)
	}
	c.Close()
	if _, err := New("n1").(transport.SocketConn).DialSocket(context.Background(), filepath.Join(root, "none.sock")); err == nil {
		t.Error("a missing socket dialled")
	}
}
