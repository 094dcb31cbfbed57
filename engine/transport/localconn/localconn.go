// Package localconn implements transport.Conn on this machine: pull mode
// (`ansible_connection: local`, `-c local`), a host-root run from a
// privileged container, and the tests of the node-side scripts and of the
// modules, which need a real shell but no SSH. It sits beside sshconn and,
// like it, knows only the transport vocabulary: the protocol spoken over
// the connection (engine/node) is layered on top.
package localconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"nodeconverge/engine/transport"
)

// local runs the node-side scripts on this machine (see the package
// comment); Root set makes it a host-root connection.
type local struct {
	name string
	// shell is the program run as `<shell> -s` (Options.Shell).
	shell string
	// root, when not "", is the node's root directory as this process
	// sees it; every script runs chrooted into it.
	root string
	// sudoUser, when not "", runs every script through `sudo -n -u`.
	sudoUser string
	// env, when not nil, replaces the controller's environment
	// (Options.Env, or the node's own with Root).
	env []string
	// rootPath, with root, is argv[0]'s path inside the root, found at
	// dial: this machine's PATH lookup names this machine's binary.
	rootPath string
}

// Options configure a local connection.
type Options struct {
	// Root is the node's root filesystem as seen from here, for a run in
	// a privileged container that mounts the host's / (the toolkit
	// container's --host-root, for instance /host). Scripts run chrooted
	// into it, so every path, the node's own containerd and its systemctl
	// are the node's. "" runs on this machine's own root.
	Root string
	// BecomeUser runs the scripts as that user through `sudo -n` when it
	// is not the current user; "" runs them as the current user.
	BecomeUser string
	// Shell is the program every script is fed to as `<Shell> -s`; ""
	// is sh, which is what a node runs. The tests of the node-side
	// scripts set it to bash as well, because dash (Debian's sh) reads
	// its script ahead and bash does not, and a script must work under
	// both.
	Shell string
	// Env, when not nil, is the whole environment of every script,
	// replacing the controller's own (or, with Root, the node's minimal
	// one): tests put fake node commands first on PATH with it.
	Env []string
}

// NodePath is the PATH a host-root run gives the node's shell: the
// container's own PATH names the container's binaries, not the node's.
const NodePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// New returns a Conn that runs `sh -s` on this machine, feeding it the
// script and then stdin exactly as an SSH connection would.
func New(name string) transport.Conn {
	return &local{name: name, shell: "sh"}
}

// Dial returns a local connection for host name with o. It checks
// what it can before any script runs: that Root is a directory holding
// /bin/sh, that this process may chroot, and that the root's /proc shows
// this process (the host's PID namespace, hostPID in Kubernetes), without
// which the node lock could not tell whether this run is alive.
func Dial(name string, o Options) (transport.Conn, error) {
	l := &local{name: name, shell: "sh"}
	if o.Shell != "" {
		l.shell = o.Shell
	}
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
		l.env = o.Env // nil: the controller's own
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
	if o.Env != nil {
		l.env = o.Env
	}
	return l, nil
}

// A local connection's shells are this process's children, so the node lock
// is tied to the controller rather than to some ancestor sshd.
var _ transport.HolderConn = (*local)(nil)

// argv is the command every script is fed to: the shell, through sudo
// when the connection becomes another user (the user name is one argv
// word: no shell sees it).
func (l *local) argv() []string {
	if l.sudoUser != "" {
		return []string{"sudo", "-n", "-u", l.sudoUser, "--", l.shell, "-s"}
	}
	return []string{l.shell, "-s"}
}

// WaitDelay bounds how long Run waits for a cancelled script's children to
// close their output before the pipes are closed under them, so it is also
// the longest a cancelled Run takes to return.
const WaitDelay = 5 * time.Second

// Run feeds script and then stdin to a fresh shell, the way an SSH
// connection's `sh -s` receives them, so the scripts tested here are the
// scripts a node runs.
func (l *local) Run(ctx context.Context, script string, stdin []byte) (*transport.CmdResult, error) {
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
	cmd.WaitDelay = WaitDelay
	err := cmd.Run()
	res := &transport.CmdResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
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

// DialSocket connects to the unix socket at path on this machine, or under
// the host root: pull mode speaks to the node's daemons directly.
func (l *local) DialSocket(ctx context.Context, p string) (net.Conn, error) {
	if !path.IsAbs(p) {
		return nil, fmt.Errorf("%s: socket path %q is not absolute", l.name, p)
	}
	if l.root != "" {
		p = filepath.Join(l.root, p)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", p)
	if err != nil {
		return nil, fmt.Errorf("%s: dial %s: %w", l.name, p, err)
	}
	return c, nil
}

var _ transport.SocketConn = (*local)(nil)

// Name is the inventory name the connection was made for, for messages.
func (l *local) Name() string { return l.name }

// HolderPID is this process: a local script's shell is its child, and the
// run lives exactly as long as it does.
func (l *local) HolderPID() int { return os.Getpid() }

// Close has nothing to release: every Run is its own process.
func (l *local) Close() error { return nil }
