package node

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"nodeconverge/engine/transport"
)

// readCache remembers what this run read from the node, item by item
// (files, glob matches, read-only command results, staged validations).
// Writes do not clear it: Apply and ApplyLater teach it what they wrote
// (and the round trip that carries writes reads the node's hashes of them
// back and fails when they differ, verify.go); an Exec that names what it
// touches forgets only those paths, any other Exec, a failed Apply and a
// Rollback clear it; staged proofs survive writes (a unit reads only its
// own staged files). Several
// modules of one play read the same containerd tree and dump the same live
// config; with the cache, and the runner's prefetch of every task's reads in
// one Query, that costs one round trip per host, not one per task. The
// node's files can only change under the run through another writer, which
// the node lock keeps out.
type readCache struct {
	mu     sync.Mutex
	files  map[string]*transport.FileInfo
	globs  map[string][]string
	cmds   map[string]*transport.CmdResult
	stages map[string][]*transport.CmdResult
	// reads are the Cmd.Reads of the cached commands that name any, by
	// the command's key: a write to one of those paths drops the result.
	reads map[string][]string
	// memos are the programs of the cached Memo commands, by the
	// command's key: their output depends on nothing else.
	memos map[string]string
	// units are staged experiments by content (unitKey), whatever request
	// they came in: the proofs a run made.
	units map[string]*transport.CmdResult
	hits  int64
	// unitRuns and unitHits count units staged and units answered from
	// units; they survive clear.
	unitRuns, unitHits int64
}

func (c *readCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files, c.globs, c.cmds, c.reads, c.memos, c.stages, c.units = nil, nil, nil, nil, nil, nil, nil
}

// forget drops what the run read of paths a command may change, and every
// command result (a command's output may depend on them) but a Memo
// command's whose program is not among the paths: its output depends on
// the program alone. Glob matches and staged validations stay (a staged
// experiment reads only its own files).
func (c *readCache) forget(paths []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range paths {
		delete(c.files, p)
	}
	kept := map[string]*transport.CmdResult{}
	for k, prog := range c.memos {
		r, ok := c.cmds[k]
		if !ok || slices.ContainsFunc(paths, func(p string) bool { return mayBe(p, prog) }) {
			delete(c.memos, k)
			continue
		}
		kept[k] = r
	}
	c.cmds, c.reads = kept, nil
}

// mayBe says whether path p may be the program prog: prog itself, or, for
// a name the node's PATH resolves, any file of that name.
func mayBe(p, prog string) bool {
	if strings.Contains(prog, "/") {
		return path.Clean(p) == path.Clean(prog)
	}
	return path.Base(p) == prog
}

// ensure makes the maps a cleared cache lacks; c.mu is held.
func (c *readCache) ensure() {
	if c.files == nil {
		c.files, c.globs, c.cmds = map[string]*transport.FileInfo{}, map[string][]string{}, map[string]*transport.CmdResult{}
	}
}

// learn remembers files read after the run's own change (Exec reads back
// what its command touched).
func (c *readCache) learn(files []*transport.FileInfo) {
	if len(files) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensure()
	for _, f := range files {
		c.files[f.Path] = f
	}
}

// wrote teaches the cache what a successful Apply did to the paths it
// names, so the next task and the re-check after apply read them from
// memory. Metadata follows Apply's rules: an op's mode, owner and group
// when set, else the file's previous ones, else 0644. Glob matches are
// updated with the node shell's matching rules. Command results and staged
// validations stay, but for a command whose Reads names a path Apply
// changed, or a Memo command whose program it changes: Apply only changes
// the files it names (Exec, which can change anything, clears the cache).
func (c *readCache) wrote(ops []transport.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		return
	}
	set := func(p string, f *transport.FileInfo) {
		c.files[p] = f
		for g, ms := range c.globs {
			ok, err := transport.ShellMatch(g, p)
			if err != nil || !ok {
				continue
			}
			var out []string
			for _, m := range ms {
				if m != p {
					out = append(out, m)
				}
			}
			if f.Exists {
				out = append(out, p)
				sort.Strings(out)
			}
			c.globs[g] = out
		}
	}
	for _, op := range ops {
		for k, rs := range c.reads {
			if slices.ContainsFunc(rs, func(r string) bool { return changes(op, r) }) {
				delete(c.cmds, k)
				delete(c.reads, k)
			}
		}
		for k, prog := range c.memos {
			if mayBe(op.Path, prog) || op.From != "" && mayBe(op.From, prog) {
				delete(c.cmds, k)
				delete(c.memos, k)
			}
		}
		prev := c.files[op.Path]
		switch op.Kind {
		case transport.OpWrite:
			f := &transport.FileInfo{Path: op.Path, Exists: true, Content: op.Content, Mode: op.Mode, Owner: op.Owner, Group: op.Group}
			set(op.Path, f.Written(prev))
		case transport.OpRemove:
			set(op.Path, &transport.FileInfo{Path: op.Path})
		case transport.OpMove:
			from := c.files[op.From]
			set(op.From, &transport.FileInfo{Path: op.From})
			if from != nil && from.Exists {
				moved := *from
				moved.Path = op.Path
				set(op.Path, &moved)
			} else {
				// Unknown content: forget it, the next Query reads it.
				delete(c.files, op.Path)
			}
		}
	}
}

// changes says whether op may change the state of path r: it writes,
// removes or moves r, or a path below it (a write makes missing parent
// directories).
func changes(op transport.Op, r string) bool {
	for _, p := range []string{op.Path, op.From} {
		if p != "" && (p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/")) {
			return true
		}
	}
	return false
}

// lookup answers q from the cache when every item of it is there.
func (c *readCache) lookup(q transport.Query) (*transport.Snapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &transport.Snapshot{Files: map[string]*transport.FileInfo{}, Globs: map[string][]string{}}
	for _, p := range q.Files {
		f, ok := c.files[p]
		if !ok {
			return nil, false
		}
		s.Files[p] = f
	}
	for _, g := range q.Globs {
		ms, ok := c.globs[g]
		if !ok {
			return nil, false
		}
		for _, m := range ms {
			f, ok := c.files[m]
			if !ok {
				return nil, false
			}
			s.Files[m] = f
		}
		s.Globs[g] = append([]string{}, ms...)
	}
	for _, cmd := range q.Cmds {
		k, err := key(cmd)
		if err != nil {
			return nil, false
		}
		r, ok := c.cmds[k]
		if !ok {
			return nil, false
		}
		s.Cmds = append(s.Cmds, r)
	}
	c.hits++
	return s, true
}

// store remembers every item of q's answer.
func (c *readCache) store(q transport.Query, s *transport.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ensure()
	for _, p := range q.Files {
		c.files[p] = s.File(p)
	}
	for _, g := range q.Globs {
		c.globs[g] = append([]string{}, s.Globs[g]...)
		for _, m := range s.Globs[g] {
			c.files[m] = s.File(m)
		}
	}
	for i, cmd := range q.Cmds {
		if k, err := key(cmd); err == nil && i < len(s.Cmds) {
			c.cmds[k] = s.Cmds[i]
			if len(cmd.Reads) > 0 {
				if c.reads == nil {
					c.reads = map[string][]string{}
				}
				c.reads[k] = cmd.Reads
			}
			if cmd.Memo && len(cmd.Argv) > 0 {
				if c.memos == nil {
					c.memos = map[string]string{}
				}
				c.memos[k] = cmd.Argv[0]
			}
		}
	}
}

func key(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// stageKey fingerprints a StageRequest; map order does not matter. The
// files go into the hash as length-prefixed bytes, not through JSON (which
// base64-encoded every staged config file on every Stage, cache hit or
// not: a twentieth of a drift run's CPU).
func stageKey(r transport.StageRequest) (string, error) {
	names := make([]string, 0, len(r.Files))
	for n := range r.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	binary.BigEndian.PutUint64(n[:], uint64(len(names)))
	h.Write(n[:])
	for _, name := range names {
		f := r.Files[name]
		put([]byte(name))
		put(f.Content)
		binary.BigEndian.PutUint64(n[:], uint64(f.Mode))
		h.Write(n[:])
	}
	cmds, err := json.Marshal(r.Cmds)
	if err != nil {
		return "", err
	}
	put(cmds)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Query reads files, expands globs and runs read-only commands in one round
// trip, or answers from what this run already read; see query. Each caller
// gets its own maps: the check-mode overlay lays planned files over a
// snapshot and must not change the cache.
func (h *Host) Query(ctx context.Context, q transport.Query) (*transport.Snapshot, error) {
	if s, ok := h.cache.lookup(q); ok {
		return s, nil
	}
	s, err := h.query(ctx, q)
	if err != nil {
		return nil, err
	}
	h.cache.store(q, s)
	return s, nil
}

// Prefetch reads in one round trip what the coming tasks will ask for, so
// their Queries are answered from the cache. The runner merges every task's
// Registration.Prefetch query of a play into one.
func (h *Host) Prefetch(ctx context.Context, q transport.Query) error {
	if len(q.Files)+len(q.Globs)+len(q.Cmds) == 0 {
		return nil
	}
	_, err := h.Query(ctx, q)
	return err
}

// MergeQueries unions queries, keeping the first occurrence of each item.
func MergeQueries(qs ...transport.Query) transport.Query {
	var out transport.Query
	seen := map[string]bool{}
	for _, q := range qs {
		for _, p := range q.Files {
			if !seen["f"+p] {
				seen["f"+p] = true
				out.Files = append(out.Files, p)
			}
		}
		for _, g := range q.Globs {
			if !seen["g"+g] {
				seen["g"+g] = true
				out.Globs = append(out.Globs, g)
			}
		}
		for _, c := range q.Cmds {
			k, err := key(c)
			if err != nil || !seen["c"+k] {
				seen["c"+k] = true
				out.Cmds = append(out.Cmds, c)
			}
		}
	}
	return out
}

// Stage validates candidates in a scratch directory in one round trip, or
// answers from this run's identical requests; see stage. The plain part
// (Files and Cmds) is answered from an identical plain part, each unit from
// an identical unit (unitKey: its files and its command, not its place in
// the request), so modules that stage overlapping sets of experiments, and
// the re-check after apply on the tree the plan proved, pay for each
// experiment once. Only what no earlier request answered is staged, in one
// round trip, identical units of the request staged once.
func (h *Host) Stage(ctx context.Context, r transport.StageRequest) ([]*transport.CmdResult, error) {
	plain := len(r.Files)+len(r.Cmds) > 0
	pk, err := stageKey(transport.StageRequest{Files: r.Files, Cmds: r.Cmds})
	if err != nil {
		return nil, fmt.Errorf("%s: stage: %w", h.Host(), err)
	}
	uks := make([]string, len(r.Units))
	for i, u := range r.Units {
		if uks[i], err = unitKey(u); err != nil {
			return nil, fmt.Errorf("%s: stage: unit %d: %w", h.Host(), i, err)
		}
	}
	out := make([]*transport.CmdResult, len(r.Cmds)+len(r.Units))
	var miss transport.StageRequest
	missAt := map[string]int{} // unit key -> index in miss.Units
	h.cache.mu.Lock()
	plainRes, plainHit := h.cache.stages[pk]
	needPlain := plain && !plainHit
	if plain && plainHit {
		copy(out, plainRes)
		h.cache.hits++
	} else if needPlain {
		miss.Files, miss.Cmds = r.Files, r.Cmds
	}
	for i, k := range uks {
		if res, ok := h.cache.units[k]; ok {
			out[len(r.Cmds)+i] = res
			h.cache.hits++
			h.cache.unitHits++
			continue
		}
		if _, ok := missAt[k]; !ok {
			missAt[k] = len(miss.Units)
			miss.Units = append(miss.Units, r.Units[i])
		}
	}
	h.cache.mu.Unlock()
	if !needPlain && len(miss.Units) == 0 {
		return out, nil
	}
	res, err := h.stage(ctx, miss.Flat())
	if err != nil {
		return nil, err
	}
	nPlain := len(miss.Cmds)
	if len(res) != nPlain+len(miss.Units) {
		return nil, fmt.Errorf("%s: stage: %d results for %d commands", h.Host(), len(res), nPlain+len(miss.Units))
	}
	h.cache.mu.Lock()
	defer h.cache.mu.Unlock()
	if h.cache.stages == nil {
		h.cache.stages, h.cache.units = map[string][]*transport.CmdResult{}, map[string]*transport.CmdResult{}
	}
	if needPlain {
		copy(out, res[:nPlain])
		h.cache.stages[pk] = append([]*transport.CmdResult(nil), res[:nPlain]...)
	}
	for k, j := range missAt {
		h.cache.units[k] = res[nPlain+j]
		h.cache.unitRuns++
	}
	for i, k := range uks {
		if out[len(r.Cmds)+i] == nil {
			out[len(r.Cmds)+i] = res[nPlain+missAt[k]]
		}
	}
	return out, nil
}

// unitKey fingerprints a StageUnit by content: its files (names, contents,
// modes; map order does not matter) and its command.
func unitKey(u transport.StageUnit) (string, error) {
	return stageKey(transport.StageRequest{Files: u.Files, Cmds: []transport.Cmd{u.Cmd}})
}

// StageCounts says how many staged units this run ran on the node and how
// many it answered from an identical unit of an earlier request instead
// (identical units of one request run once and count once), for tests and
// benchmarks.
func (h *Host) StageCounts() (ran, reused int64) {
	h.cache.mu.Lock()
	defer h.cache.mu.Unlock()
	return h.cache.unitRuns, h.cache.unitHits
}

// Refresh forgets what this run read, for a caller that knows the node
// changed under it by other means (a test editing files behind the run's
// back). Runs themselves never need it: their own writes clear the cache.
func (h *Host) Refresh() { h.cache.clear() }
