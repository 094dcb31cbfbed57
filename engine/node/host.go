// Package node is the protocol nodeconverge speaks to a node over any
// transport.Conn: Host turns the Reader and Writer calls of modules into
// one shell script per round trip (script.go) and reads its framed answer
// (frames.go), remembers what the run read (cache.go), keeps private
// scratch directories (scratch.go), backs up and rolls back what it
// changes (rollback.go), holds the node lock (lock.go) and records the
// handlers a node is owed (pending.go). It is apart from engine/transport
// so that modules, which only ask, depend on the vocabulary and not on the
// scripts, and so that connections (sshconn, localconn) stay free of the
// protocol they carry.
package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"nodeconverge/engine/transport"
)

// DefaultStateDir is where nodeconverge keeps its state on a node.
const DefaultStateDir = "/var/lib/nodeconverge"

// DefaultKeepBackups is how many runs' backup directories a node keeps.
const DefaultKeepBackups = 10

// HostOptions configures a Host.
type HostOptions struct {
	// RunID names this run's backup directory. Runs are pruned oldest
	// first by name, so it should sort by time; NewRunID makes one.
	// Empty means NewRunID().
	RunID string
	// StateDir is nodeconverge's directory on the node; backups go to
	// StateDir/backups/<RunID>/<absolute path>. Empty means
	// DefaultStateDir.
	StateDir string
	// KeepBackups is how many runs' backup directories to keep, this run
	// included. 0 means DefaultKeepBackups.
	KeepBackups int
	// NoMemoWrites is for runs that promise to write nothing (check mode,
	// explain): a Memo command's output already kept under StateDir/memo
	// is used, but a new one is not kept. Such a run then leaves nothing on
	// the node but StateDir and its tmp/ directory, each script's private
	// directory in it removed when the script ends.
	NoMemoWrites bool
}

// Stats counts what a Host sent and received, for benchmarks and for
// checking that a module used one round trip.
type Stats struct {
	RoundTrips    int64
	BytesSent     int64
	BytesReceived int64
	// SocketDials counts the streams opened to a node's unix sockets
	// (DialSocket): each is one more round trip to open, then carries a
	// daemon's own protocol.
	SocketDials int64
}

// Host implements Writer (and so Reader) over a Conn: each method is one
// shell script, run with one Conn.Run.
type Host struct {
	conn transport.Conn
	opts HostOptions

	cache readCache
	// queue holds the writes ApplyLater accepted (queue.go).
	queue writeQueue
	// kept are runs whose backups pruning leaves alone (KeepRuns).
	kept atomic.Pointer[[]string]

	roundTrips atomic.Int64
	sent       atomic.Int64
	received   atomic.Int64
	dials      atomic.Int64
}

var _ transport.Writer = (*Host)(nil)

// NewHost returns a Host that talks to a node over c.
func NewHost(c transport.Conn, opts HostOptions) *Host {
	if opts.RunID == "" {
		opts.RunID = NewRunID(time.Now())
	}
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.KeepBackups <= 0 {
		opts.KeepBackups = DefaultKeepBackups
	}
	return &Host{conn: c, opts: opts}
}

// NewRunID returns a run id that sorts by time: 20261129T211000Z-abcd.
func NewRunID(t time.Time) string {
	b := make([]byte, 2)
	// A failed read leaves zeros: the id is still valid, only less unique
	// within one second, so it is not worth failing a run for.
	if _, err := rand.Read(b); err != nil {
		b = []byte{0, 0}
	}
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// Host returns the node's inventory name.
func (h *Host) Host() string { return h.conn.Name() }

// Stats returns the round trips and bytes so far.
func (h *Host) Stats() Stats {
	return Stats{
		RoundTrips:    h.roundTrips.Load(),
		BytesSent:     h.sent.Load(),
		BytesReceived: h.received.Load(),
		SocketDials:   h.dials.Load(),
	}
}

// DialSocket opens a stream to the unix socket at path on the node over
// the host's connection (transport.SocketConn); a connection that has no
// way to do that fails wrapping transport.ErrNoSocket. It is not a script:
// nothing queued is sent and the read cache stays.
func (h *Host) DialSocket(ctx context.Context, path string) (net.Conn, error) {
	sc, ok := h.conn.(transport.SocketConn)
	if !ok {
		return nil, fmt.Errorf("%s: dial %s: %w", h.Host(), path, transport.ErrNoSocket)
	}
	h.dials.Add(1)
	// The connection's error names the host and the socket.
	return sc.DialSocket(ctx, path)
}

// run sends s and returns its records, checking that the script got to its
// end record.
func (h *Host) run(ctx context.Context, what string, s *script) (*frames, *transport.CmdResult, error) {
	holder := 0
	if hc, ok := h.conn.(transport.HolderConn); ok {
		holder = hc.HolderPID()
	}
	exact := false
	if ec, ok := h.conn.(transport.ExactStdinConn); ok {
		exact = ec.ExactStdin()
	}
	text, stdin, answer, err := s.build(h.opts.StateDir, holder, !exact, h.opts.NoMemoWrites)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s: %w", h.Host(), what, err)
	}
	h.roundTrips.Add(1)
	h.sent.Add(int64(len(text) + len(stdin)))
	res, err := h.conn.Run(ctx, text, stdin)
	if res != nil {
		h.received.Add(int64(len(res.Stdout) + len(res.Stderr)))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s: %w", h.Host(), what, err)
	}
	// The last record is "Z\n"; without it the script died part way and
	// its stderr says why.
	if res.ExitCode != 0 || !strings.HasSuffix(string(res.Stdout), "Z\n") {
		return nil, nil, fmt.Errorf("%s: %s: remote script failed (exit %d): %s",
			h.Host(), what, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return &frames{b: res.Stdout, marker: answer}, res, nil
}

// query reads files, expands globs and runs read-only commands in one round
// trip. Globs are expanded by the node's shell in the C locale, so matches
// sort bytewise and, as in any shell, `*` does not match a leading dot (ask
// for `dir/.*.toml` as well to see hidden files). A path that exists but
// cannot be read fails the Query with a *ReadError.
func (h *Host) query(ctx context.Context, q transport.Query) (*transport.Snapshot, error) {
	// The node is read as the queued writes leave it.
	if err := h.Flush(ctx); err != nil {
		return nil, err
	}
	snap, err := h.queryOnce(ctx, q, true)
	if errors.Is(err, errTorn) {
		// A file changed while it was read: read again from copies.
		snap, err = h.queryOnce(ctx, q, false)
	}
	return snap, err
}

// errTorn is a Query whose files did not keep the sizes stat gave them
// until cat printed them.
var errTorn = errors.New("a file changed while it was read")

// queryOnce is one Query round trip; direct lets the node print regular
// files without copying them first (see prelude).
func (h *Host) queryOnce(ctx context.Context, q transport.Query, direct bool) (*transport.Snapshot, error) {
	s := &script{}
	if err := h.queryBody(s, q, direct); err != nil {
		return nil, err
	}
	f, _, err := h.run(ctx, "query", s)
	if err != nil {
		return nil, err
	}
	return h.readSnapshot(f, q)
}

// queryBody appends q's reads to s, ending with the S record (_nc_emit).
func (h *Host) queryBody(s *script, q transport.Query, direct bool) error {
	if direct {
		s.line("_nc_qd=1")
	} else {
		s.line("_nc_qd=0")
	}
	if err := h.queryReads(s, q, false, 0); err != nil {
		return err
	}
	s.line(`_nc_emit "$@"`)
	return nil
}

// queryReads appends q's file reads, glob expansions and commands to s,
// its commands numbered from first; soft leaves out what is not a readable
// regular file (see readFiles).
func (h *Host) queryReads(s *script, q transport.Query, soft bool, first int) error {
	if err := s.readFiles(soft, q.Files); err != nil {
		return fmt.Errorf("%s: query: file %w", h.Host(), err)
	}
	flag := ""
	if soft {
		flag = " soft"
	}
	for i, g := range q.Globs {
		if err := checkQueryPath(g); err != nil {
			return fmt.Errorf("%s: query: glob %q: %w", h.Host(), g, err)
		}
		// Unquoted on purpose, with IFS empty: expanded, never split.
		s.line("_nc_g=" + transport.ShellQuote(g))
		s.line(`for _nc_f in $_nc_g; do if [ -e "$_nc_f" ] || [ -L "$_nc_f" ]; then`)
		s.line(fmt.Sprintf(`printf 'M %d %%d\n%%s' "${#_nc_f}" "$_nc_f"`, i))
		s.line(`_nc_k=$((_nc_k + 1)); _nc_copy "$_nc_k" "$_nc_f"` + flag + ` && set -- "$@" "$_nc_c" "$_nc_f"`)
		s.line("fi; done")
	}
	for i, c := range q.Cmds {
		if c.Then != nil {
			return fmt.Errorf("%s: query: command %d: Then is for Exec", h.Host(), i)
		}
		if err := s.cmd(first+i, c, false); err != nil {
			return fmt.Errorf("%s: query: command %d: %w", h.Host(), i, err)
		}
	}
	return nil
}

// readSnapshot reads q's answer, up to the end record.
func (h *Host) readSnapshot(f *frames, q transport.Query) (*transport.Snapshot, error) {
	snap := &transport.Snapshot{
		Files: make(map[string]*transport.FileInfo, len(q.Files)),
		Globs: make(map[string][]string, len(q.Globs)),
		Cmds:  make([]*transport.CmdResult, len(q.Cmds)),
	}
	for _, g := range q.Globs {
		snap.Globs[g] = []string{}
	}
	if err := parseSnapshot(f, q, snap); err != nil {
		return nil, fmt.Errorf("%s: query: %w", h.Host(), err)
	}
	return snap, nil
}

func parseSnapshot(f *frames, q transport.Query, snap *transport.Snapshot) error {
	a, err := f.readAnswer(len(q.Cmds))
	if err != nil {
		return err
	}
	if a.failed != nil {
		return fmt.Errorf("unexpected X record")
	}
	for _, fi := range a.files {
		snap.Files[fi.Path] = fi
	}
	for _, m := range a.matches {
		if m.glob >= len(q.Globs) {
			return fmt.Errorf("match for glob %d of %d", m.glob, len(q.Globs))
		}
		snap.Globs[q.Globs[m.glob]] = append(snap.Globs[q.Globs[m.glob]], m.name)
	}
	copy(snap.Cmds, a.cmds)
	return nil
}

// checkQueryPath accepts what a shell word can carry. Relative paths are
// allowed (they resolve against the remote login directory) but are rarely
// what a module means, so modules should pass absolute ones.
func checkQueryPath(p string) error {
	if p == "" {
		return fmt.Errorf("empty path")
	}
	return checkNUL(p)
}

// stage lays the files out in a fresh scratch directory (mode 0700, inside
// the script's private directory under StateDir/tmp: see scratch.go), exports its path as SCRATCH, runs the
// commands in order inside it, and removes it however the script ends. Every
// command runs even when an earlier one failed; the caller judges the
// results.
func (h *Host) stage(ctx context.Context, r transport.StageRequest) ([]*transport.CmdResult, error) {
	// A validation may read live files (copy's validate command, a
	// candidate that imports the live drop-ins): they are the queued
	// writes' result.
	if err := h.Flush(ctx); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(r.Files))
	for name := range r.Files {
		if err := checkRelPath(name); err != nil {
			return nil, fmt.Errorf("%s: stage: file %q: %w", h.Host(), name, err)
		}
		names = append(names, name)
	}
	// Sorted so parents are made before children and a failure names the
	// same file on every run.
	sort.Strings(names)
	s := &script{}
	s.pre.WriteString("SCRATCH=\"$T/scratch\"\nexport SCRATCH\n")
	// Every directory in one mkdir, the scratch directory first and each
	// directory after its parent; none may exist before. A name whose directory is another
	// staged file (or the same name twice, once unclean) cannot be laid
	// out: refused here, naming it, before the node is asked.
	cleaned := make([]string, len(names))
	byClean := make(map[string]string, len(names))
	for i, name := range names {
		cleaned[i] = path.Clean(name)
		if other, ok := byClean[cleaned[i]]; ok {
			return nil, fmt.Errorf("%s: stage: file %q: the same path as %q", h.Host(), name, other)
		}
		byClean[cleaned[i]] = name
	}
	var dirs []string
	seen := map[string]bool{}
	for i, name := range names {
		for d := path.Dir(cleaned[i]); d != "."; d = path.Dir(d) {
			if other, ok := byClean[d]; ok {
				return nil, fmt.Errorf("%s: stage: write %s: its directory %s is the staged file %q", h.Host(), name, d, other)
			}
		}
		for d := path.Dir(cleaned[i]); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	// A parent sorts before its children.
	sort.Strings(dirs)
	words := []string{"mkdir", "-m", "0700", "--", `"$SCRATCH"`}
	for _, d := range dirs {
		words = append(words, `"$SCRATCH"/`+transport.ShellQuote(d))
	}
	s.pre.WriteString(strings.Join(words, " ") + " || exit 117\n")
	for i, name := range names {
		// Created with the umask that gives the mode; chmod only for
		// modes a umask cannot give (execute and special bits).
		mode := r.Files[name].Mode
		if mode == 0 {
			mode = 0o644
		}
		umask, chmod := createUmask(mode), ""
		if umask == "" {
			umask, chmod = "0077", chmodArg(mode)
		}
		s.blobAt(r.Files[name].Content, strings.Join([]string{"_nc_sblob", fmt.Sprint(i), "%d",
			transport.ShellQuote(cleaned[i]), umask, transport.ShellQuote(chmod)}, " "))
	}
	s.line(`cd -- "$SCRATCH"`, `||`, `exit 117`)
	for i, c := range r.Cmds {
		if err := s.cmd(i, c, false); err != nil {
			return nil, fmt.Errorf("%s: stage: command %d: %w", h.Host(), i, err)
		}
	}
	s.line(`cd /`)
	s.line(`_nc_emit`)
	f, _, err := h.run(ctx, "stage", s)
	if err != nil {
		return nil, err
	}
	a, err := f.readAnswer(len(r.Cmds))
	if err != nil {
		return nil, fmt.Errorf("%s: stage: %w", h.Host(), err)
	}
	if a.failed != nil {
		if a.failed.index >= len(names) {
			return nil, fmt.Errorf("%s: stage: failure of file %d of %d", h.Host(), a.failed.index, len(names))
		}
		return nil, fmt.Errorf("%s: stage: write %s: %s", h.Host(), names[a.failed.index], strings.TrimSpace(a.failed.msg))
	}
	if len(a.files) > 0 || len(a.matches) > 0 {
		return nil, fmt.Errorf("%s: stage: unexpected file records", h.Host())
	}
	return a.cmds, nil
}

// checkRelPath accepts a path that stays inside the scratch directory.
func checkRelPath(p string) error {
	if err := checkNUL(p); err != nil {
		return err
	}
	if p == "" || path.IsAbs(p) {
		return fmt.Errorf("must be a relative path")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("must not contain ..")
		}
	}
	if path.Clean(p) == "." {
		return fmt.Errorf("names the scratch directory itself")
	}
	return nil
}

// checkLivePath accepts an absolute, clean path other than /.
func checkLivePath(p string) error {
	if err := checkNUL(p); err != nil {
		return err
	}
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("must be a clean absolute path other than /")
	}
	return nil
}

// Apply performs ops in order, each atomically, and stops at the first
// failure, returning the results of the ops that completed and an *OpError.
//
// A write goes to a temporary file in the target's directory (created 0755
// when missing), takes the existing file's owner, group and mode unless the
// op names them (a new file is 0644, owned by the connecting user), is
// synced, renamed over the target and the directory synced. A symbolic link
// at the target is followed, so the file it points to is replaced. With
// Backup, the previous version is copied (cp -a) to
// StateDir/backups/<RunID>/<path> before it changes; the first backup of a
// path in a run wins, so the backup is the state before the run. A move
// backs up both the source and an existing destination and reports the
// source's backup. Removing a missing path succeeds. A keep op changes
// nothing: it saves the path's content for Rollback (see OpKeep). Before any op, backup
// directories of older runs beyond KeepBackups are removed.
//
// Every op on a path outside StateDir is also recorded, before it is
// performed, in the run's manifest (see Rollback), so the run can be undone
// even when the controller dies part way. StateDir itself (pending records,
// the lock) is nodeconverge's bookkeeping and is never rolled back.
func (h *Host) Apply(ctx context.Context, ops []transport.Op) ([]transport.OpResult, error) {
	carried, by := h.queue.take()
	if len(carried) == 0 && len(ops) == 0 {
		return nil, nil
	}
	// What this run read stays valid but for the paths it writes: the
	// cache learns them from the ops when every op succeeded (carried ops
	// it learned when they were queued), and forgets everything when one
	// failed (the node is then in a state it did not plan).
	done := false
	defer func() {
		if done {
			h.cache.wrote(ops)
		} else {
			h.cache.clear()
		}
	}()
	all := append(append([]transport.Op(nil), carried...), ops...)
	s := &script{}
	if err := h.opsBody(s, all); err != nil {
		h.queue.putBack(carried, by)
		return nil, err
	}
	// What the ops left is read back in the same round trip (verify.go).
	exp := expectations(all, h.opts.StateDir)
	verifyBody(s, exp)
	f, _, err := h.run(ctx, "apply", s)
	if err != nil {
		return nil, err
	}
	results, err := h.readOps(f, all, by)
	if err == nil {
		err = h.readVerify(f, exp, by)
	}
	if err != nil {
		// The ops of this call that completed, for the caller's message.
		if len(results) > len(carried) {
			return results[len(carried):], err
		}
		return nil, err
	}
	hdr, err := f.header()
	if err == nil && hdr[0] != "Z" {
		err = fmt.Errorf("unexpected %s record", hdr[0])
	}
	if err == nil {
		err = f.end()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: apply: %w", h.Host(), err)
	}
	done = true
	return results[len(carried):], nil
}

// opsBody appends ops to s: the backup pruning before the first op that
// keeps a backup, then each op and its O record. An op that fails prints
// its X record and ends the script (_nc_fail).
func (h *Host) opsBody(s *script, ops []transport.Op) error {
	if err := h.checkOptions(); err != nil {
		return fmt.Errorf("%s: apply: %w", h.Host(), err)
	}
	backups := path.Join(h.opts.StateDir, "backups")
	s.line("BK=" + transport.ShellQuote(path.Join(backups, h.opts.RunID)))
	s.line("SD=" + transport.ShellQuote(h.opts.StateDir))
	for _, op := range ops {
		if op.Backup {
			// Keep KeepBackups-1 older runs: this run's directory,
			// created below, is the last one kept.
			// This run's directory and those of runs still owed a
			// handler (KeepRuns) are never pruned.
			words := []string{"_nc_prune", transport.ShellQuote(backups), fmt.Sprint(h.opts.KeepBackups - 1), transport.ShellQuote(h.opts.RunID)}
			if kept := h.kept.Load(); kept != nil {
				for _, id := range *kept {
					words = append(words, transport.ShellQuote(id))
				}
			}
			s.line(append(words, `> "$T/e" 2>&1 || _nc_fail -1`)...)
			break
		}
	}
	for i, op := range ops {
		if err := checkLivePath(op.Path); err != nil {
			return fmt.Errorf("%s: apply: op %d (%s %q): %w", h.Host(), i, op.Kind, op.Path, err)
		}
		backup := "0"
		if op.Backup {
			backup = "1"
		}
		var words []string
		switch op.Kind {
		case transport.OpWrite:
			if err := checkNUL(op.Owner + op.Group); err != nil {
				return fmt.Errorf("%s: apply: op %d (write %s): owner or group: %w", h.Host(), i, op.Path, err)
			}
			content := op.Content
			if content == nil {
				content = []byte{}
			}
			words = []string{"_nc_write", transport.ShellQuote(op.Path), s.blob(content),
				transport.ShellQuote(chmodArg(op.Mode)), transport.ShellQuote(op.Owner), transport.ShellQuote(op.Group), backup,
				transport.ShellQuote(createUmask(op.Mode))}
		case transport.OpMove:
			if err := checkLivePath(op.From); err != nil {
				return fmt.Errorf("%s: apply: op %d (move %q): from: %w", h.Host(), i, op.From, err)
			}
			words = []string{"_nc_move", transport.ShellQuote(op.Path), transport.ShellQuote(op.From), backup}
		case transport.OpRemove:
			words = []string{"_nc_remove", transport.ShellQuote(op.Path), backup}
		case transport.OpKeep:
			words = []string{"_nc_keep", transport.ShellQuote(op.Path)}
		default:
			return fmt.Errorf("%s: apply: op %d: unknown kind %q", h.Host(), i, op.Kind)
		}
		words = append(words, `> "$T/e" 2>&1 || _nc_fail`, fmt.Sprint(i))
		s.line(words...)
		s.line("_nc_ok", fmt.Sprint(i))
	}
	return nil
}

// readOps reads the O record of every op opsBody wrote, or the X record of
// the one that failed. by names, for the first len(by) ops, the step that
// queued each (ApplyLater), so a failure says whose change it was.
func (h *Host) readOps(f *frames, ops []transport.Op, by []string) ([]transport.OpResult, error) {
	results := make([]transport.OpResult, 0, len(ops))
	for len(results) < len(ops) {
		hdr, err := f.header()
		if err != nil {
			return results, fmt.Errorf("%s: apply: %w", h.Host(), err)
		}
		switch hdr[0] {
		case "O":
			i, bk, err := f.readText(hdr)
			if err != nil {
				return results, fmt.Errorf("%s: apply: %w", h.Host(), err)
			}
			if i != len(results) || i >= len(ops) {
				return results, fmt.Errorf("%s: apply: result for op %d out of order", h.Host(), i)
			}
			results = append(results, transport.OpResult{Path: ops[i].Path, BackupPath: bk})
		case "X":
			// X -1 is the pruning before the first op.
			if len(hdr) == 3 && hdr[1] == "-1" {
				hdr[1] = "0"
				_, msg, err := f.readText(hdr)
				if err != nil {
					return results, fmt.Errorf("%s: apply: %w", h.Host(), err)
				}
				return results, fmt.Errorf("%s: apply: prune backups in %s: %s", h.Host(), path.Join(h.opts.StateDir, "backups"), strings.TrimSpace(msg))
			}
			i, msg, err := f.readText(hdr)
			if err != nil {
				return results, fmt.Errorf("%s: apply: %w", h.Host(), err)
			}
			if i >= len(ops) {
				return results, fmt.Errorf("%s: apply: failure of op %d of %d", h.Host(), i, len(ops))
			}
			var oe error = &OpError{Index: i, Op: ops[i], Stderr: strings.TrimSpace(msg)}
			if i < len(by) && by[i] != "" {
				oe = fmt.Errorf("a change of %s, sent with this step: %w", by[i], oe)
			}
			return results, fmt.Errorf("%s: apply: %w", h.Host(), oe)
		default:
			return results, fmt.Errorf("%s: apply: %d of %d ops reported before a %s record", h.Host(), len(results), len(ops), hdr[0])
		}
	}
	return results, nil
}

// KeepRuns keeps the backup directories of runs still owed a handler (their
// pending records name them) from being pruned by this Host's Applies: an
// owed restart whose gates fail rolls those runs back (RollbackRun), however
// many runs came since.
func (h *Host) KeepRuns(ids []string) {
	kept := append([]string(nil), ids...)
	h.kept.Store(&kept)
}

// checkRunID refuses a run id that cannot name one directory below
// StateDir/backups.
func checkRunID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00\n") {
		return fmt.Errorf("run id %q cannot name a directory", id)
	}
	return nil
}

// checkOptions validates what Apply builds backup paths from.
func (h *Host) checkOptions() error {
	if err := checkRunID(h.opts.RunID); err != nil {
		return err
	}
	if err := checkLivePath(h.opts.StateDir); err != nil {
		return fmt.Errorf("state dir %q: %w", h.opts.StateDir, err)
	}
	return nil
}

// Exec runs a command that may change the node: Script with `sh -c`, or
// Argv as one quoted command. A non-zero exit is in the result, not an
// error. Commands run with LC_ALL=C, so their output does not depend on
// the node's locale.
func (h *Host) Exec(ctx context.Context, c transport.Cmd) (*transport.CmdResult, error) {
	if c.Touches != nil {
		h.cache.forget(c.Touches)
	} else {
		h.cache.clear()
	}
	then := c.Then
	c.Then = nil
	s := &script{}
	carried, by := h.queue.take()
	if err := h.execBody(s, c, then, carried); err != nil {
		// Not sent: the queue waits for the next round trip.
		h.queue.putBack(carried, by)
		return nil, err
	}
	f, _, err := h.run(ctx, "exec", s)
	if err != nil {
		if len(carried) > 0 {
			// The queued writes may or may not have landed.
			h.cache.clear()
		}
		return nil, err
	}
	_, err = h.readOps(f, carried, by)
	if err == nil {
		err = h.readVerify(f, expectations(carried, h.opts.StateDir), by)
	}
	if err != nil {
		h.cache.clear()
		return nil, fmt.Errorf("%s: exec: not run: %w", h.Host(), err)
	}
	nThen := 0
	if then != nil {
		nThen = len(then.Cmds)
	}
	a, err := f.readAnswerSome(1+nThen, 1)
	if err != nil {
		return nil, fmt.Errorf("%s: exec: %w", h.Host(), err)
	}
	if a.failed != nil || then == nil && len(a.matches) > 0 {
		return nil, fmt.Errorf("%s: exec: unexpected records", h.Host())
	}
	h.cache.learn(a.files)
	if then != nil && a.cmds[0].OK() {
		if snap, ok := thenSnapshot(*then, a); ok {
			h.cache.store(*then, snap)
		}
	}
	return a.cmds[0], nil
}

// execBody builds Exec's script: the carried ops (synced before the
// command starts; one that fails ends the script, so the command does not
// run), the command, the read-back of what it touched, and then's reads.
func (h *Host) execBody(s *script, c transport.Cmd, then *transport.Query, carried []transport.Op) error {
	if len(carried) > 0 {
		if err := h.opsBody(s, carried); err != nil {
			return err
		}
		s.line("_nc_sync")
		// What they left is read back before the command runs
		// (verify.go): a command must not run on files that are not
		// what the plan wrote.
		verifyBody(s, expectations(carried, h.opts.StateDir))
	}
	if err := s.cmd(0, c, true); err != nil {
		return fmt.Errorf("%s: exec: %w", h.Host(), err)
	}
	s.line(`_nc_x=$_nc_rc`)
	// The paths the command touched are read back in the same round
	// trip (those the shell can read), so the re-check after apply finds
	// them in the cache instead of asking again.
	if err := s.readFiles(true, c.Touches); err != nil {
		return fmt.Errorf("%s: exec: touched path %w", h.Host(), err)
	}
	if then != nil {
		// Only after a command that succeeded: a failed restart's health
		// gate would only wait out its deadline.
		s.line(`if [ "$_nc_x" = 0 ]; then`)
		if err := h.queryReads(s, *then, true, 1); err != nil {
			return fmt.Errorf("%s: exec: then %w", h.Host(), err)
		}
		s.line("fi")
	}
	s.line(`_nc_emit "$@"`)
	return nil
}

// thenSnapshot is the answer to an Exec's Then query, when the node read
// all of it: a file or glob match the soft reads left out (not a readable
// regular file) leaves the query to a round trip of its own, which says
// what it is.
func thenSnapshot(q transport.Query, a *answer) (*transport.Snapshot, bool) {
	read := make(map[string]*transport.FileInfo, len(a.files))
	for _, fi := range a.files {
		read[fi.Path] = fi
	}
	snap := &transport.Snapshot{Files: map[string]*transport.FileInfo{}, Globs: map[string][]string{}, Cmds: a.cmds[1:]}
	for _, c := range snap.Cmds {
		if c == nil {
			return nil, false
		}
	}
	for _, p := range q.Files {
		fi, ok := read[p]
		if !ok {
			return nil, false
		}
		snap.Files[p] = fi
	}
	for _, g := range q.Globs {
		snap.Globs[g] = []string{}
	}
	for _, m := range a.matches {
		if m.glob >= len(q.Globs) {
			return nil, false
		}
		fi, ok := read[m.name]
		if !ok {
			return nil, false
		}
		g := q.Globs[m.glob]
		snap.Globs[g] = append(snap.Globs[g], m.name)
		snap.Files[m.name] = fi
	}
	return snap, true
}

// createUmask is the umask that creates a file with mode m, so a write
// needs no chmod, or "" when none can (execute and special bits, which a
// created file never gets, and 0: keep the previous file's mode).
func createUmask(m fs.FileMode) string {
	if m == 0 || m.Perm()&0o111 != 0 || m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		return ""
	}
	return fmt.Sprintf("%04o", 0o777&^uint32(m.Perm()))
}
