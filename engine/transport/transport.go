// Package transport is the vocabulary every part of nodeconverge shares for
// talking to a node: the Conn a connection provides (sshconn, localconn),
// and the Reader and Writer a module plans and applies through, with their
// requests and answers. It holds no implementation of either, so a module
// depends on what it may ask of a node, not on how the asking is done; the
// node-side protocol that implements Reader and Writer over a Conn is
// engine/node.
//
// Reading and writing are split on purpose: planning code receives a Reader,
// which has no method that can change a live path, and only the apply step
// receives a Writer. Check mode is safe because the planning step cannot
// name a write, not because every module remembers an `if !apply`.
//
// Every method is one remote round trip: a module gathers its whole state with
// one Query, validates a candidate with one Stage, and applies with one Apply.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
)

// Conn runs one shell script on a node and returns its output. It is the only
// primitive a connection has to provide; sshconn implements it over one
// connection per host, and localconn on this machine (pull mode, a host
// root, and tests of the remote scripts themselves).
type Conn interface {
	// Run starts `sh -s` (wrapped in `sudo -n` when the connection becomes
	// another user), feeds script then stdin on its standard input, and
	// returns what it printed. A non-zero exit is not an error; a broken
	// connection is.
	Run(ctx context.Context, script string, stdin []byte) (*CmdResult, error)
	// Name is the inventory name of the host, for messages.
	Name() string
	// Close ends the connection.
	Close() error
}

// HolderConn is a Conn whose node-side shells are children of the
// controller itself (a local or host-root connection) rather than of an
// sshd. HolderPID is the process, as the node's /proc shows it, whose life
// is the connection's: the node lock and the scripts' private directories
// are tied to it, so an operator's own SSH session around the run (pull
// mode started by hand) does not keep a dead run's lock alive.
type HolderConn interface {
	Conn
	HolderPID() int
}

// ExactStdinConn is a Conn whose scripts start reading their stdin exactly
// where the data begins, because the script reached the shell by some way
// other than the shell's own reads of that stdin (sshconn reads it with an
// exact-count reader, then evaluates it). No read-ahead can swallow data
// there, so the filler that guards a plain `sh -s` against it is not sent:
// reading 16 KiB a line at a time costs a node about 30 ms of CPU per
// script, a large part of a converge on a node where processes are dear.
type ExactStdinConn interface {
	Conn
	ExactStdin() bool
}

// SocketConn is a Conn that can also open a stream to a unix socket on the
// node, without running anything there: over SSH an OpenSSH
// direct-streamlocal channel on the host's one connection (sshd connects to
// the socket as the login user), locally the socket itself (under the host
// root for --host-root). It is how a module speaks a daemon's own API (the
// containerd CRI socket) instead of asking a CLI on the node.
type SocketConn interface {
	Conn
	// DialSocket connects to the unix socket at path, an absolute path
	// as the node sees it. The stream is closed by the caller; closing
	// the Conn ends it too.
	DialSocket(ctx context.Context, path string) (net.Conn, error)
}

// ErrNoSocket is what DialSocket returns, wrapped, where the connection has
// no way to reach a node's unix socket.
var ErrNoSocket = errors.New("this connection cannot open a node's unix socket")

// CmdResult is what a remote command printed and how it ended.
type CmdResult struct {
	Stdout   []byte `json:"-"`
	Stderr   []byte `json:"-"`
	ExitCode int    `json:"exit_code"`
}

// OK reports whether the command exited 0.
func (r *CmdResult) OK() bool { return r != nil && r.ExitCode == 0 }

// FileInfo is the state of one path on a node.
type FileInfo struct {
	Path    string      `json:"path"`
	Exists  bool        `json:"exists"`
	IsDir   bool        `json:"is_dir,omitempty"`
	Mode    fs.FileMode `json:"mode"`
	UID     int         `json:"uid"`
	GID     int         `json:"gid"`
	Owner   string      `json:"owner,omitempty"`
	Group   string      `json:"group,omitempty"`
	Content []byte      `json:"-"`
}

// Written is f as Apply leaves it when it replaces prev: a zero Mode and
// empty Owner and Group keep the previous file's, and a new file without a
// mode is created 0644. The check-mode overlay and the read cache both
// predict files this way, so neither reports a change apply never makes.
func (f *FileInfo) Written(prev *FileInfo) *FileInfo {
	c := *f
	if !c.Exists {
		return &c
	}
	if prev != nil && prev.Exists && !prev.IsDir {
		if c.Mode == 0 {
			c.Mode = prev.Mode
		}
		if c.Owner == "" {
			c.Owner, c.UID = prev.Owner, prev.UID
		}
		if c.Group == "" {
			c.Group, c.GID = prev.Group, prev.GID
		}
	} else if c.Mode == 0 {
		c.Mode = 0o644
	}
	return &c
}

// Cmd is a command for a node. Script is shell text run by `sh -c`; Argv,
// when set, is quoted for the shell instead, so values never need escaping
// by the caller.
type Cmd struct {
	Script string
	Argv   []string
	Stdin  []byte
	// Touches, for Exec, names every path the command may change (sysctl -p
	// changes only /proc/sys files); what the run read of other paths stays
	// valid. Nil means the command may change anything.
	Touches []string `json:",omitempty"`
	// Reads, for a Query, names the paths whose state a read-only
	// command's output depends on (file's probe of a path's kind, mode
	// and owner): the run's own writes to any of them (Apply) drop the
	// cached result. Without Reads a result stays cached across Apply,
	// which changes only the files it names; Exec forgets every command
	// result either way.
	Reads []string `json:",omitempty"`
	// Memo, for a Query, marks a command whose output depends only on the
	// program it runs (Argv[0], found in PATH when it has no slash), such
	// as `containerd --version`. Starting that program can cost a node as
	// much as a config dump (a Go binary initialises every plugin before
	// it reads its flags), so the node keeps the output of a run that
	// exited 0 with nothing on stderr, keyed by the program file's
	// identity (device, inode, size, modification and change times), and
	// answers later runs from it while the file stays the same. Argv only.
	Memo bool `json:",omitempty"`
	// Then, for Exec, is a Query the node answers in the same round trip,
	// after the command (a restart's health gate reads the node as the
	// restart left it): the answer goes to the run's read cache, so the
	// caller's next Query of exactly it costs no round trip. A part of it
	// the node cannot read leaves it to that Query.
	Then *Query `json:",omitempty"`
}

// Query asks for a node's state in one round trip.
type Query struct {
	// Files are read whole, with their metadata. A missing file is
	// reported with Exists false, not as an error.
	Files []string
	// Globs are expanded on the node (sorted, as the shell sorts them in
	// the C locale) and every match is read like Files.
	Globs []string
	// Cmds are run in order after the files are read; they must only read.
	Cmds []Cmd
}

// ShellMatch matches a path against a glob as the node's shell expands it:
// segment by segment, and a segment starting with '.' is matched only by a
// pattern segment that starts with '.' too (filepath.Match alone lets `*`
// match hidden files, which a shell glob never lists).
func ShellMatch(glob, p string) (bool, error) {
	gs, ps := strings.Split(glob, "/"), strings.Split(p, "/")
	if len(gs) != len(ps) {
		// Still report a malformed pattern, whatever the path.
		_, err := filepath.Match(glob, p)
		return false, err
	}
	for i := range gs {
		if strings.HasPrefix(ps[i], ".") && !strings.HasPrefix(gs[i], ".") {
			return false, nil
		}
		ok, err := filepath.Match(gs[i], ps[i])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// Snapshot is the answer to a Query.
type Snapshot struct {
	Files map[string]*FileInfo
	Globs map[string][]string
	Cmds  []*CmdResult
}

// File returns the state of path, or a non-existent FileInfo when the
// snapshot did not see it.
func (s *Snapshot) File(path string) *FileInfo {
	if f, ok := s.Files[path]; ok {
		return f
	}
	return &FileInfo{Path: path}
}

// StagedFile is a file placed in a private scratch directory for validation.
type StagedFile struct {
	Content []byte
	Mode    fs.FileMode
}

// StageRequest asks the node to lay files out in a fresh scratch directory,
// run commands that may refer to it as $SCRATCH, and remove it again. It is
// how candidates are validated with the node's own tools before anything
// live changes.
type StageRequest struct {
	// Files maps a path relative to the scratch directory to its content.
	Files map[string]StagedFile
	Cmds  []Cmd
	// Units are independent experiments staged in the same round trip,
	// each in a directory of its own; their results follow those of Cmds,
	// one per unit, in order.
	Units []StageUnit
}

// StageUnit is one self-contained experiment: Files laid out in a fresh
// directory of the scratch area (names relative to it) and Cmd run with
// that directory as its working directory ($SCRATCH is the whole scratch
// area). Its result depends only on its files and its command, so a Host
// answers a unit identical to one this run already staged (same contents,
// modes, names and command) from memory: a proof made while planning is
// the proof of the re-check after apply when the files are the same, and
// any changed byte is a different unit.
type StageUnit struct {
	Files map[string]StagedFile
	Cmd   Cmd
}

// Flat is r with every unit laid out in its own directory (u0, u1, ...)
// of the scratch area and its command appended to Cmds, run there: the
// same experiments as one plain request, whose results are in the order r
// promises (Cmds, then one per unit).
func (r StageRequest) Flat() StageRequest {
	if len(r.Units) == 0 {
		return r
	}
	out := StageRequest{Files: make(map[string]StagedFile, len(r.Files)), Cmds: append([]Cmd(nil), r.Cmds...)}
	for n, f := range r.Files {
		out.Files[n] = f
	}
	for i, u := range r.Units {
		dir := fmt.Sprintf("u%d", i)
		for n, f := range u.Files {
			out.Files[dir+"/"+n] = f
		}
		c := u.Cmd
		script := c.Script
		if len(c.Argv) > 0 {
			words := make([]string, len(c.Argv))
			for k, a := range c.Argv {
				words[k] = ShellQuote(a)
			}
			script = "exec " + strings.Join(words, " ")
		}
		c.Argv = nil
		c.Script = `cd -- "$SCRATCH"/` + dir + " || exit 117\n" + script
		out.Cmds = append(out.Cmds, c)
	}
	return out
}

// Reader is the read-only view of a node that planning receives.
type Reader interface {
	Host() string
	Query(ctx context.Context, q Query) (*Snapshot, error)
	Stage(ctx context.Context, r StageRequest) ([]*CmdResult, error)
}

// OpKind names what an Op does to a live path.
type OpKind string

// The operations Apply knows. They are few on purpose: each is atomic on the
// node and each can be undone from the run's backup.
const (
	OpWrite  OpKind = "write"  // replace or create Path with Content
	OpMove   OpKind = "move"   // rename From to Path (same filesystem or copy+remove)
	OpRemove OpKind = "remove" // remove Path
	// OpKeep changes nothing: it saves Path's content under the run's
	// backup directory and records it, so Rollback writes it back in
	// place. It is for a path the run then changes in place with a
	// command, one that no rename can replace: a kernel setting under
	// /proc/sys set by `sysctl`.
	OpKeep OpKind = "keep"
)

// Op is one change to a live path.
type Op struct {
	Kind    OpKind
	Path    string
	From    string
	Content []byte
	Mode    fs.FileMode // 0 keeps the existing mode, or 0644 for a new file
	Owner   string      // "" keeps the existing owner
	Group   string      // "" keeps the existing group
	// Backup keeps the previous content under the run's backup directory
	// on the node before the path changes.
	Backup bool
}

// OpResult tells where the previous version of a path went.
type OpResult struct {
	Path       string `json:"path"`
	BackupPath string `json:"backup,omitempty"`
}

// Writer is what the apply step receives: a Reader that can also change the
// node.
type Writer interface {
	Reader
	// Apply performs ops in order; each write goes to a temporary file in
	// the target's directory, is fsynced and renamed over the target, then
	// the directory is fsynced. It stops at the first failure.
	Apply(ctx context.Context, ops []Op) ([]OpResult, error)
	// Exec runs a command that may change the node.
	Exec(ctx context.Context, c Cmd) (*CmdResult, error)
	// Rollback undoes every op this run applied (outside the state
	// directory), newest first, and returns the paths it changed.
	Rollback(ctx context.Context) ([]string, error)
	// RunID is the id this run's backups and manifest are kept under.
	RunID() string
	// DialSocket opens a stream to a unix socket on the node (see
	// SocketConn); it fails wrapping ErrNoSocket where the connection
	// cannot.
	DialSocket(ctx context.Context, path string) (net.Conn, error)
}

// Prover is what a proof of a running daemon receives (`apply --check
// --prove`, explain --prove): it reads like a Reader, opens the daemon's
// socket, and runs the commands a proof makes (crictl, when the socket
// cannot be opened). A proof starts and removes a pod sandbox; it writes
// no file. A Writer is a Prover too, which is how a restart's health gate
// runs the same proof; ProveOnly gives check mode one without Apply.
type Prover interface {
	Reader
	Exec(ctx context.Context, c Cmd) (*CmdResult, error)
	DialSocket(ctx context.Context, path string) (net.Conn, error)
}
