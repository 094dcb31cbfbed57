package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// local runs the node-side scripts on this machine: pull mode
// (`ansible_connection: local`, `-c local`), a host-root run from a
// privileged container (Root set), and the tests of the scripts and modules.
type local struct {
	name string
	// shell is the program run as `<shell> -s`; tests set it to check
	// the scripts under more than one shell.
	shell string
	// root, when not "", is the node's root directory as this process
	// sees it; every script runs chrooted into it.
	root string
	// sudoUser, when not "", runs every script through `sudo -n -u`.
	sudoUser string
	// env, when not nil, replaces the controller's environment.
	env []string
	// rootPath, with root, is argv[0]'s path inside the root, found at
	// dial: this machine's PATH lookup names this machine's binary.
	rootPath string
}

// LocalOptions configure a local connection.
type LocalOptions struct {
	// Root is the node's root filesystem as seen from here, for a run in
	// a privileged container that mounts the host's / (the toolkit
	// container's --host-root, for instance /host). Scripts run chrooted
	// into it, so every path, the node's own containerd and its systemctl
	// are the node's. "" runs on this machine's own root.
	Root string
	// BecomeUser runs the scripts as that user through `sudo -n` when it
	// is not the current user; "" runs them as the current user.
	BecomeUser string
}

// NodePath is the PATH a host-root run gives the node's shell: the
// container's own PATH names the container's binaries, not the node's.
const NodePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// NewLocal returns a Conn that runs `sh -s` on this machine, feeding it the
// script and then stdin exactly as an SSH connection would.
func NewLocal(name string) Conn {
	return &local{name: name, shell: "sh"}
}

// DialLocal returns a local connection for host name with o. It checks
// what it can before any script runs: that Root is a directory holding
// /bin/sh, that this process may chroot, and that the root's /proc shows
// this process (the host's PID namespace, hostPID in Kubernetes), without
// which the node lock could not tell whether this run is alive.
func DialLocal(name string, o LocalOptions) (Conn, error) {
	l := &local{name: name, shell: "sh"}
	if o.BecomeUser != "" {
		cur, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("%s: become %s: current user: %w", name, o.BecomeUser, err)
		}
		if cur.Username != o.BecomeUser {
			l.sudoUser = o.BecomeUser
		}
	}
	if o.Root == "" {
		return l, nil
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, fmt.Errorf("%s: host root %s: %w", name, o.Root, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("%s: host root: %w", name, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s: host root %s is not a directory", name, root)
	}
	if _, err := os.Stat(filepath.Join(root, "bin/sh")); err != nil {
		return nil, fmt.Errorf("%s: host root %s has no /bin/sh: %w", name, root, err)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%s: host root %s: chroot needs root (running as uid %d)", name, root, os.Geteuid())
	}
	self, err := os.Readlink(filepath.Join(root, "proc/self"))
	if err != nil {
		return nil, fmt.Errorf("%s: host root %s: its /proc is not mounted: %w", name, root, err)
	}
	if self != strconv.Itoa(os.Getpid()) {
		return nil, fmt.Errorf("%s: host root %s: its /proc shows another PID namespace (this process is %d here, %s there); run in the host's PID namespace (hostPID: true)", name, root, os.Getpid(), self)
	}
	l.root = root
	l.env = []string{"PATH=" + NodePath, "HOME=/root", "LC_ALL=C"}
	prog := l.argv()[0]
	for _, dir := range filepath.SplitList(NodePath) {
		if fi, err := os.Stat(filepath.Join(root, dir, prog)); err == nil && !fi.IsDir() {
			l.rootPath = path.Join(dir, prog)
			break
		}
	}
	if l.rootPath == "" {
		return nil, fmt.Errorf("%s: host root %s has no %s on %s", name, root, prog, NodePath)
	}
	return l, nil
}

// argv is the command every script is fed to: the shell, through sudo
// when the connection becomes another user (the user name is one argv
// word: no shell sees it).
func (l *local) argv() []string {
	if l.sudoUser != "" {
		return []string{"sudo", "-n", "-u", l.sudoUser, "--", l.shell, "-s"}
	}
	return []string{l.shell, "-s"}
}

// localWaitDelay bounds how long Run waits for a cancelled script's children
// to close their output before the pipes are closed under them.
const localWaitDelay = 5 * time.Second

func (l *local) Run(ctx context.Context, script string, stdin []byte) (*CmdResult, error) {
	argv := l.argv()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = io.MultiReader(strings.NewReader(script), bytes.NewReader(stdin))
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.Env = l.env
	// Own process group, and SIGTERM on cancel rather than SIGKILL: the
	// script's EXIT trap must get to remove its temporary directory, and
	// the commands it started must go too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if l.root != "" {
		// The kernel's chroot before exec: the shell, and every program
		// it starts, is the node's. exec.Command looked argv[0] up on
		// this machine (an error there means nothing here).
		cmd.Path = l.rootPath
		cmd.Err = nil
		cmd.SysProcAttr.Chroot = l.root
		cmd.Dir = "/"
	}
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
		return res, fmt.Errorf("%s: run %s: %w", l.name, strings.Join(argv, " "), err)
	}
	return res, nil
}

func (l *local) Name() string { return l.name }

// HolderPID is this process: a local script's shell is its child, and the
// run lives exactly as long as it does.
func (l *local) HolderPID() int { return os.Getpid() }

// Close has nothing to release: every Run is its own process.
func (l *local) Close() error { return nil }
