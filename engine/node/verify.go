package node

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"

	"nodeconverge/engine/transport"
)

// Write-behind truth. A queued step is reported changed when its writes are
// checked and queued, and the re-check after apply reads the controller's
// own model of them (the read cache learned them at ApplyLater). So when the
// writes travel, the same round trip reads back what the node then holds:
// one sha256sum of every path the ops leave with content, compared on the
// node with what was written, and every path they leave absent checked
// absent (a moved file's new path present). A difference ends the script
// before anything after the writes runs (the command a queue rides on
// included), and the carrying call fails naming each path, what the node
// holds, and the step whose write it was; the runner then rolls the host
// back. It costs one process per round trip that carries writes.

// expectation is what one path must be after a round trip's ops.
type expectation struct {
	path string
	// hash is the hex SHA-256 of the content written; "" with absent
	// false means the path must only exist (a move's destination).
	hash   string
	absent bool
	// op is the index of the last op that decided it, for the message.
	op int
}

// expectations are, per path the ops change, what the last op changing it
// leaves there, in path order. Paths under stateDir are nodeconverge's own
// bookkeeping (pending records, the lock), not what a plan manages: they
// are not read back.
func expectations(ops []transport.Op, stateDir string) []expectation {
	by := map[string]expectation{}
	own := strings.TrimSuffix(stateDir, "/") + "/"
	for i, op := range ops {
		if stateDir != "" && (strings.HasPrefix(op.Path, own) || op.Kind == transport.OpMove && strings.HasPrefix(op.From, own)) {
			continue
		}
		switch op.Kind {
		case transport.OpWrite:
			by[op.Path] = expectation{path: op.Path, hash: fmt.Sprintf("%x", sha256.Sum256(op.Content)), op: i}
		case transport.OpRemove:
			by[op.Path] = expectation{path: op.Path, absent: true, op: i}
		case transport.OpMove:
			by[op.From] = expectation{path: op.From, absent: true, op: i}
			by[op.Path] = expectation{path: op.Path, op: i}
		}
	}
	out := make([]expectation, 0, len(by))
	for _, e := range by {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// hashable says whether sha256sum prints p as it is (it escapes a name
// with a backslash or a newline); such a path is only checked present.
func hashable(p string) bool { return !strings.ContainsAny(p, "\\\n") }

// verifyBody appends the read-back of what ops left to s (see above).
func verifyBody(s *script, exp []expectation) {
	var hashed, want []string
	for _, e := range exp {
		q := transport.ShellQuote(e.path)
		switch {
		case e.absent:
			s.line(`{ [ ! -e`, q, `] && [ ! -L`, q, `]; } || _nc_vfail`, transport.ShellQuote(e.path+": present"))
		case e.hash == "" || !hashable(e.path):
			s.line(`[ -e`, q, `] || _nc_vfail`, transport.ShellQuote(e.path+": absent"))
		default:
			hashed = append(hashed, q)
			want = append(want, e.hash+"  "+e.path)
		}
	}
	if len(hashed) == 0 {
		return
	}
	s.line(append(append([]string{`_nc_h=$(sha256sum --`}, hashed...), `2>&1) || :`)...)
	s.line(`[ "$_nc_h" = ` + transport.ShellQuote(strings.Join(want, "\n")) + ` ] || _nc_vfail "$_nc_h"`)
}

// verifyError words what _nc_vfail reported: each expectation the node's
// answer contradicts, with the step whose op it was (by, for queued ops).
func verifyError(exp []expectation, by []string, got string) error {
	held := map[string]string{}
	for _, l := range strings.Split(got, "\n") {
		if h, p, ok := strings.Cut(l, "  "); ok && len(h) == 64 {
			held[p] = h
		}
	}
	var diffs []string
	if len(held) == 0 && strings.Contains(got, "sha256sum") {
		// No hash at all: the node's sha256sum itself failed (missing,
		// say); its words say why.
		return fmt.Errorf("the writes could not be read back: %s", strings.TrimSpace(got))
	}
	whose := func(e expectation) string {
		if e.op < len(by) && by[e.op] != "" {
			return " (a change of " + by[e.op] + ")"
		}
		return ""
	}
	for _, e := range exp {
		if e.absent || e.hash == "" || !hashable(e.path) {
			continue
		}
		switch h, ok := held[e.path]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: not readable after the write, sha256:%s written%s", e.path, short(e.hash), whose(e)))
		case h != e.hash:
			diffs = append(diffs, fmt.Sprintf("%s holds sha256:%s, not the sha256:%s written%s", e.path, short(h), short(e.hash), whose(e)))
		}
	}
	if len(diffs) == 0 {
		// A presence check failed: its own words.
		msg := strings.TrimSpace(got)
		for _, e := range exp {
			if strings.HasPrefix(msg, e.path+": ") {
				msg += whose(e)
				break
			}
		}
		diffs = append(diffs, msg)
	}
	return fmt.Errorf("the node does not hold what was written: %s", strings.Join(diffs, "; "))
}

// short is the first 12 hex digits of a hash, as messages show them.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// readVerify reads the X -2 record verifyBody's check prints when the node
// does not hold what was written, and returns it as an error; without one
// it reads nothing.
func (h *Host) readVerify(f *frames, exp []expectation, by []string) error {
	if len(exp) == 0 {
		return nil
	}
	off := f.off
	hdr, err := f.header()
	if err != nil || hdr[0] != "X" || hdr[1] != "-2" {
		f.off = off
		return nil
	}
	hdr[1] = "0"
	_, msg, err := f.readText(hdr)
	if err != nil {
		return fmt.Errorf("%s: apply: read back the writes: %w", h.Host(), err)
	}
	return fmt.Errorf("%s: apply: %w", h.Host(), verifyError(exp, by, msg))
}
