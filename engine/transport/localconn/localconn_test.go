package localconn

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
