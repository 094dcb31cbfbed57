// Package e2e runs the real nodeconverge binary against a real local lab:
// sshd per node in its own mount namespace, real containerd, real files.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nodeconverge/lab/labtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nc-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdtemp:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "nodeconverge")
	build := exec.Command("go", "build", "-o", binary, "nodeconverge/cmd/nodeconverge")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build nodeconverge:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "cleanup:", err)
	}
	os.Exit(code)
}

// result is one invocation of the binary.
type result struct {
	code   int
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// nc runs the binary with args and returns its outcome; it fails the test
// only when the binary could not run at all.
func nc(t *testing.T, args ...string) result {
	t.Helper()
	return runCmd(t, command(args...))
}

// runCmd runs cmd (with SSH_AUTH_SOCK emptied, so only the keys the
// inventory names are used) and returns its outcome; it fails the test
// only when cmd could not run at all.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "SSH_AUTH_SOCK=")
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run %v: %v", cmd.Args, err)
		}
		code = ee.ExitCode()
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// command is the binary with args and no SSH agent, so a run can only use
// the keys the lab's inventory names.
func command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK=")
	return cmd
}

// labArgs are the flags that point the binary at a lab.
func labArgs(l *labtest.Lab, extra ...string) []string {
	return append([]string{"-i", l.Inventory, "--known-hosts", l.KnownHosts, "--ssh-config", "/dev/null"}, extra...)
}

// writePlaybook writes a playbook into a temp dir and returns its path.
func writePlaybook(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "play.yaml")
	if err := os.WriteFile(p, []byte(strings.TrimLeft(body, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
}
