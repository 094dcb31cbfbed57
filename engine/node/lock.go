package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path"
	"strconv"
	"strings"
	"time"

	"nodeconverge/engine/transport"
)

// The node lock.
//
// Design: one owner file per holder in StateDir/lock.d ("x" for the
// exclusive holder, "s.<RunID>" for each shared holder). Every look at or
// change of lock.d happens under flock(1) on StateDir/lock.guard, held only
// for the few milliseconds of one script, so two runs cannot both take the
// lock or both take over a stale one. flock alone cannot be the lock: no
// process of ours lives on the node between round trips to keep a file
// descriptor open.
//
// Liveness: the owner file names the process that holds the run's
// connection on the node. A local or host-root connection (HolderConn)
// names it: the controller itself. Over SSH it is the nearest ancestor of
// the script's shell whose comm starts with "sshd" (the per-connection
// sshd, or sshd-session on OpenSSH 9.8+), or, when there is none, the
// shell's parent. That process lives
// exactly as long as the controller's connection: when the controller exits
// or is SIGKILLed, the TCP connection closes and the sshd process exits. A
// holder whose process is gone (no /proc/<pid>/stat, a zombie, a different
// comm, or a different start time, which rules out pid reuse) is stale and
// its lock is taken over; the NodeLock says so in TookOver. Before that,
// the stale holder's scripts that still run are ended: the connection's
// death does not end them (sshd closes their pipes without a signal; one
// blocked in a step learns of it only at its next write, and may write to
// the node before that). Each script's private directory is named after
// its holder and its own shell (scratch.go), so the node finds them,
// SIGKILLs each with every process below it, and takes the lock only once
// all of them are gone; otherwise it refuses (sh/lock.sh, _nc_lend). Never
// two writers.
//
// Shared locks are for runs that must not overlap an apply but may overlap
// each other. The runner need not take any lock in check mode: check mode
// never writes, and an apply's writes are atomic per file, so a concurrent
// check sees each file either before or after. It may take a shared one to
// refuse to plan against a node mid-apply.

// LockOwner identifies a run that holds, or held, a node lock.
type LockOwner struct {
	RunID string    `json:"run_id"`
	Host  string    `json:"host"` // the controller's hostname
	User  string    `json:"user"` // the controller's user
	PID   int       `json:"pid"`  // the controller's process
	Since time.Time `json:"since"`
	// Filled in by the node: the process that holds the run's connection,
	// whose death releases the lock.
	HolderPID   int    `json:"holder_pid,omitempty"`
	HolderComm  string `json:"holder_comm,omitempty"`
	HolderStart string `json:"holder_start,omitempty"`
	Shared      bool   `json:"shared,omitempty"`
	// Ended lists, for a stale holder taken over, its scripts still
	// running on the node and the processes below them ("pid(comm) ..."),
	// which the node ended (SIGKILL, then seen gone) before it took the
	// lock: a dead connection does not end them, and they would write
	// under the new lock.
	Ended string `json:"ended,omitempty"`
}

// NewLockOwner describes this controller process for a lock taken by runID.
// An unknown hostname or user is recorded as "unknown" rather than failing
// the run: the lock works without them, they only make messages clearer.
func NewLockOwner(runID string) LockOwner {
	o := LockOwner{RunID: runID, Host: "unknown", User: "unknown", PID: os.Getpid(), Since: time.Now().UTC().Truncate(time.Second)}
	if h, err := os.Hostname(); err == nil {
		o.Host = h
	}
	if u, err := user.Current(); err == nil {
		o.User = u.Username
	}
	return o
}

// String is the holder as messages name it.
func (o LockOwner) String() string {
	return fmt.Sprintf("run %s from host %s (pid %d) since %s", o.RunID, o.Host, o.PID, o.Since.UTC().Format(time.RFC3339))
}

// encode renders the controller's part of the owner file; the node appends
// the holder lines. Values come from the controller and could hold
// anything, so line breaks are replaced.
func (o LockOwner) encode() []byte {
	clean := func(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
	return []byte(fmt.Sprintf("run=%s\nhost=%s\nuser=%s\npid=%d\nsince=%s\n",
		clean(o.RunID), clean(o.Host), clean(o.User), o.PID, o.Since.UTC().Format(time.RFC3339)))
}

// parseLockOwner reads an owner file. Unknown keys are ignored so a newer
// nodeconverge's lock is still reported by an older one.
func parseLockOwner(b string) LockOwner {
	var o LockOwner
	for _, line := range strings.Split(b, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch k {
		case "run":
			o.RunID = v
		case "host":
			o.Host = v
		case "user":
			o.User = v
		case "pid":
			o.PID, _ = strconv.Atoi(v) // a garbled pid only makes the message show 0
		case "since":
			o.Since, _ = time.Parse(time.RFC3339, v) // likewise: zero time in the message
		case "holder_pid":
			o.HolderPID, _ = strconv.Atoi(v) // the node wrote it; liveness is decided there
		case "holder_comm":
			o.HolderComm = v
		case "holder_start":
			o.HolderStart = v
		case "mode":
			o.Shared = v == "shared"
		case "ended":
			o.Ended = v
		}
	}
	return o
}

// LockHeldError says the node is locked by another live run; the node was
// not touched.
type LockHeldError struct {
	Node  string
	Owner LockOwner
}

func (e *LockHeldError) Error() string {
	kind := "locked"
	if e.Owner.Shared {
		kind = "locked (shared)"
	}
	return fmt.Sprintf("node %s is %s by %s; its connection (pid %d, %s) is alive",
		e.Node, kind, e.Owner, e.Owner.HolderPID, e.Owner.HolderComm)
}

// NodeLock is a held node lock.
type NodeLock struct {
	// Owner is this run's owner record as the node stored it.
	Owner LockOwner
	// TookOver lists stale holders whose locks were removed to take this
	// one (their connection process was gone: the run died or was
	// killed). Report them: a dead run may have left work half done.
	TookOver []LockOwner

	h    *Host
	name string
}

// Note says, for the report, which stale locks were taken over; "" when
// none were.
func (l *NodeLock) Note() string {
	if len(l.TookOver) == 0 {
		return ""
	}
	parts := make([]string, len(l.TookOver))
	for i, o := range l.TookOver {
		parts[i] = fmt.Sprintf("%s: its connection process (pid %d) is gone", o, o.HolderPID)
		if o.Ended != "" {
			parts[i] += "; its node-side processes that still ran were ended first and are gone, so they can write no more: " + o.Ended
		} else {
			parts[i] += "; none of its node-side processes was still running"
		}
	}
	return fmt.Sprintf("took over the lock of node %s from %s", l.h.Host(), strings.Join(parts, "; "))
}

// lockPrelude (sh/lock.sh) is the shell side of Lock and release.
var lockPrelude = shellLib(lockSh)

// lockScript starts a lock or unlock script for mode; the caller adds the
// call.
func (h *Host) lockScript(exclusive bool, owner []byte) *script {
	mode, name := "shared", "s."+h.opts.RunID
	if exclusive {
		mode, name = "exclusive", "x"
	}
	s := &script{}
	s.line("SD=" + transport.ShellQuote(h.opts.StateDir))
	s.line("LD=" + transport.ShellQuote(path.Join(h.opts.StateDir, "lock.d")))
	s.line("RUN=" + transport.ShellQuote(h.opts.RunID))
	s.line("MODE=" + mode)
	s.line("LNAME=" + transport.ShellQuote(name))
	s.line("_nc_lheld=")
	if owner != nil {
		s.line("OWNER=" + s.blob(owner))
	}
	s.body.WriteString(lockPrelude)
	return s
}

// Lock takes the node lock for this run in one round trip: exclusive for
// an apply, shared for runs that only must not overlap one. owner describes
// the controller (NewLockOwner); its RunID must be this Host's run id. A
// lock held by a live run fails with a *LockHeldError naming it and leaves
// the node untouched; a lock whose holder's connection is gone is taken
// over, and the returned NodeLock lists it in TookOver. Taking the lock
// again in the same run replaces the earlier record. Release it with
// NodeLock.Release; if the controller dies instead, the next run takes it
// over.
func (h *Host) Lock(ctx context.Context, exclusive bool, owner LockOwner) (*NodeLock, error) {
	return h.LockAndPrefetch(ctx, exclusive, owner, transport.Query{})
}

// LockAndPrefetch is Lock and, once the lock is this run's, Prefetch of q,
// in the same round trip: a run's first look at a node costs one session,
// not two. When the lock is refused, q is not read.
func (h *Host) LockAndPrefetch(ctx context.Context, exclusive bool, owner LockOwner, q transport.Query) (*NodeLock, error) {
	if err := h.Flush(ctx); err != nil {
		return nil, err
	}
	if err := h.checkOptions(); err != nil {
		return nil, fmt.Errorf("%s: lock: %w", h.Host(), err)
	}
	if owner.RunID != h.opts.RunID {
		return nil, fmt.Errorf("%s: lock: owner run id %q is not this host's run id %q", h.Host(), owner.RunID, h.opts.RunID)
	}
	if owner.Since.IsZero() {
		owner.Since = time.Now().UTC().Truncate(time.Second)
	}
	read := len(q.Files)+len(q.Globs)+len(q.Cmds) > 0
	if read {
		if _, ok := h.cache.lookup(q); ok {
			read = false
		}
	}
	s := h.lockScript(exclusive, owner.encode())
	s.line("_nc_lock")
	if read {
		// L ends the lock's records; the reads follow only when the lock
		// was taken.
		s.line(`printf 'L\n'`)
		s.line(`if [ -z "$_nc_lheld" ]; then`)
		if err := h.queryBody(s, q, true); err != nil {
			return nil, err
		}
		s.line("fi")
	}
	f, _, err := h.run(ctx, "lock", s)
	if err != nil {
		return nil, err
	}
	l := &NodeLock{h: h, name: "x"}
	if !exclusive {
		l.name = "s." + h.opts.RunID
	}
	var held *LockHeldError
	got := false
	for {
		hdr, err := f.header()
		if err != nil {
			return nil, fmt.Errorf("%s: lock: %w", h.Host(), err)
		}
		switch hdr[0] {
		case "O":
			kind, text, err := f.readText(hdr)
			if err != nil {
				return nil, fmt.Errorf("%s: lock: %w", h.Host(), err)
			}
			if kind == 1 {
				l.TookOver = append(l.TookOver, parseLockOwner(text))
			} else {
				l.Owner, got = parseLockOwner(text), true
			}
		case "X":
			kind, text, err := f.readText(hdr)
			if err != nil {
				return nil, fmt.Errorf("%s: lock: %w", h.Host(), err)
			}
			if kind != 0 {
				return nil, fmt.Errorf("%s: lock: %s", h.Host(), strings.TrimSpace(text))
			}
			held = &LockHeldError{Node: h.Host(), Owner: parseLockOwner(text)}
		case "L", "Z":
			if held != nil {
				return nil, held
			}
			if !got {
				return nil, fmt.Errorf("%s: lock: the node did not confirm the lock", h.Host())
			}
			if hdr[0] == "Z" {
				if err := f.end(); err != nil {
					return nil, fmt.Errorf("%s: lock: %w", h.Host(), err)
				}
				return l, nil
			}
			if err := h.prefetched(ctx, f, q); err != nil {
				// The lock is this run's: give it up rather than leave it
				// to go stale with the connection.
				if rerr := l.Release(ctx); rerr != nil {
					err = errors.Join(err, rerr)
				}
				return nil, err
			}
			return l, nil
		default:
			return nil, fmt.Errorf("%s: lock: unexpected %s record", h.Host(), hdr[0])
		}
	}
}

// prefetched caches the answer to q that follows the lock's records, or
// reads q again, every file copied, when a file changed under the read.
func (h *Host) prefetched(ctx context.Context, f *frames, q transport.Query) error {
	snap, err := h.readSnapshot(f, q)
	if errors.Is(err, errTorn) {
		snap, err = h.queryOnce(ctx, q, false)
	}
	if err != nil {
		return err
	}
	h.cache.store(q, snap)
	return nil
}

// Release gives the lock up in one round trip. A lock that is no longer
// this run's (taken over after the node judged this run dead) is left
// alone and reported as an error. served names handlers this run ran: their
// pending records (PendingPath) go in the same round trip, while the lock
// is still this run's. A run that dies before its release leaves them, and
// the next run runs those handlers again: a restart too many, never one
// too few.
func (l *NodeLock) Release(ctx context.Context, served ...string) error {
	h := l.h
	// What the run queued lands while the lock is still its own.
	if err := h.Flush(ctx); err != nil {
		return err
	}
	s := h.lockScript(l.name == "x", nil)
	words := []string{"_nc_unlock"}
	for _, hn := range served {
		words = append(words, transport.ShellQuote(PendingPath(h.opts.StateDir, hn)))
	}
	s.line(words...)
	f, _, err := h.run(ctx, "unlock", s)
	if err != nil {
		return err
	}
	for {
		hdr, err := f.header()
		if err != nil {
			return fmt.Errorf("%s: unlock: %w", h.Host(), err)
		}
		switch hdr[0] {
		case "X":
			kind, text, err := f.readText(hdr)
			if err != nil {
				return fmt.Errorf("%s: unlock: %w", h.Host(), err)
			}
			if kind == 0 {
				return fmt.Errorf("%s: unlock: the lock is no longer this run's: it is held by %s", h.Host(), parseLockOwner(text))
			}
			return fmt.Errorf("%s: unlock: %s", h.Host(), strings.TrimSpace(text))
		case "Z":
			if err := f.end(); err != nil {
				return fmt.Errorf("%s: unlock: %w", h.Host(), err)
			}
			return nil
		default:
			return fmt.Errorf("%s: unlock: unexpected %s record", h.Host(), hdr[0])
		}
	}
}
