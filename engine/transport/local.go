package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// local runs scripts with this machine's sh. It exists so the remote scripts
// and the modules built on them can be tested against a real shell and real
// files without SSH.
type local struct {
	name string
	// shell is the program run as `<shell> -s`; tests set it to check
	// the scripts under more than one shell.
	shell string
}

// NewLocal returns a Conn that runs `sh -s` on this machine, feeding it the
// script and then stdin exactly as an SSH connection would.
func NewLocal(name string) Conn {
	return &local{name: name, shell: "sh"}
}

// localWaitDelay bounds how long Run waits for a cancelled script's children
// to close their output before the pipes are closed under them.
const localWaitDelay = 5 * time.Second

func (l *local) Run(ctx context.Context, script string, stdin []byte) (*CmdResult, error) {
	cmd := exec.CommandContext(ctx, l.shell, "-s")
	cmd.Stdin = io.MultiReader(strings.NewReader(script), bytes.NewReader(stdin))
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Own process group, and SIGTERM on cancel rather than SIGKILL: the
	// script's EXIT trap must get to remove its temporary directory, and
	// the commands it started must go too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	cmd.WaitDelay = localWaitDelay
	err := cmd.Run()
	res := &CmdResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s: run script: %w", l.name, ctx.Err())
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if res.ExitCode < 0 {
			// Killed by a signal: report it the way a shell would.
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.ExitCode = 128 + int(ws.Signal())
			}
		}
	default:
		return res, fmt.Errorf("%s: run %s -s: %w", l.name, l.shell, err)
	}
	return res, nil
}

func (l *local) Name() string { return l.name }

// Close has nothing to release: every Run is its own process.
func (l *local) Close() error { return nil }
