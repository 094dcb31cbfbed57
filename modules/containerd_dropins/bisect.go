package containerddropins

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
)

// Issue 28 #3: a conf.d with 500 drop-ins was never measurable: the
// attribution of every key stages the tree once per load-order prefix and
// once without each file, over a thousand dumps in one Stage, and the stage
// failed. A tree of more than largeTree files is measured by group testing
// instead: a value a file writes that the whole tree's dump lacks is hidden
// by later files that do not write it themselves (those that do are its
// overriders, whose choice stands); removing all of them together must
// bring it back, and halving the group whose removal does finds the files
// that hide it in a number of dumps that grows with the logarithm of the
// tree, not with its size. Every stage holds at most stageChunk variants.

// largeTree is the number of loaded files above which the tree is measured
// by bisecting groups.
const largeTree = 64

// stageChunk bounds the variants of one Stage round trip.
const stageChunk = 24

// bisector stages group removals, each distinct removal once.
type bisector struct {
	ctx   context.Context
	h     transport.Reader
	t     *ctrconf.Tree
	dumps map[string]*ctrconf.Effective
	// staged counts the distinct trees dumped (the whole tree included).
	staged int
}

func setKey(files []string) string {
	s := slices.Clone(files)
	sort.Strings(s)
	return strings.Join(s, "\x00")
}

// dump makes sure every set's removal is dumped, at most stageChunk per
// Stage round trip.
func (b *bisector) dump(sets [][]string) error {
	var todo [][]string
	seen := map[string]bool{}
	for _, s := range sets {
		k := setKey(s)
		if _, ok := b.dumps[k]; ok || seen[k] {
			continue
		}
		seen[k] = true
		todo = append(todo, s)
	}
	for len(todo) > 0 {
		n := min(stageChunk, len(todo))
		vs := make([]ctrconf.Overrides, n)
		for i, s := range todo[:n] {
			o := ctrconf.Overrides{}
			for _, p := range s {
				o[p] = nil
			}
			vs[i] = o
		}
		effs, err := ctrconf.DumpMany(b.ctx, b.h, b.t, vs)
		if err != nil {
			return fmt.Errorf("dump %d groups of drop-ins removed: %w", n, err)
		}
		for i, s := range todo[:n] {
			b.dumps[setKey(s)] = effs[i]
		}
		b.staged += n
		todo = todo[n:]
	}
	return nil
}

func (b *bisector) without(files []string) *ctrconf.Effective { return b.dumps[setKey(files)] }

// back reports whether, with files removed, l's value is in effect.
func (b *bisector) back(files []string, l ctrconf.WrittenLost) bool {
	e := b.without(files)
	if e == nil || !e.OK {
		return false
	}
	v, ok := e.Get(l.DumpKey)
	return ok && v == l.Written
}

// search is one branch of the group search for the files hiding key: a
// smallest set of cands whose removal, together with ctx's, brings it back.
type search struct {
	key   int // index into the lost values
	cands []string
	ctx   []string
}

// groupSearch halves each search's candidates until single files remain:
// a half whose removal (with the search's context) brings the value back
// is searched alone; when neither half does, each is searched with the
// other removed (files of both halves hide it). Every round's removals are
// dumped together (dump), then judged (back). It returns, per lost value,
// the files found.
func groupSearch(active []search, dump func([][]string) error, back func(set []string, key int) bool) (map[int][]string, error) {
	found := map[int][]string{}
	for len(active) > 0 {
		var need [][]string
		for _, s := range active {
			if len(s.cands) > 1 {
				a, c := s.cands[:len(s.cands)/2], s.cands[len(s.cands)/2:]
				need = append(need, append(slices.Clone(s.ctx), a...), append(slices.Clone(s.ctx), c...))
			}
		}
		if err := dump(need); err != nil {
			return nil, err
		}
		var next []search
		for _, s := range active {
			if len(s.cands) == 1 {
				found[s.key] = append(found[s.key], s.cands[0])
				continue
			}
			a, c := s.cands[:len(s.cands)/2], s.cands[len(s.cands)/2:]
			switch {
			case back(append(slices.Clone(s.ctx), a...), s.key):
				next = append(next, search{key: s.key, cands: a, ctx: s.ctx})
			case back(append(slices.Clone(s.ctx), c...), s.key):
				next = append(next, search{key: s.key, cands: c, ctx: s.ctx})
			default:
				next = append(next,
					search{key: s.key, cands: a, ctx: append(slices.Clone(s.ctx), c...)},
					search{key: s.key, cands: c, ctx: append(slices.Clone(s.ctx), a...)})
			}
		}
		active = next
	}
	return found, nil
}

// bisectUnits finds the units of a large tree: the lost values, each
// group of files that hides some, and the dumps it took.
func bisectUnits(ctx context.Context, h transport.Reader, t *ctrconf.Tree, base *ctrconf.Effective) ([]unit, []ctrconf.LostKey, int, error) {
	b := &bisector{ctx: ctx, h: h, t: t, dumps: map[string]*ctrconf.Effective{setKey(nil): base}, staged: 1}
	major := t.Major()
	lost := ctrconf.LostByText(t, base)
	pos := map[string]int{}
	for i, f := range t.Files {
		pos[f.Path] = i
	}
	// The files that can hide a value: loaded after its file, mentioning
	// its plugin (any file for a top-level key), not writing it.
	candsOf := func(l ctrconf.WrittenLost) []string {
		plugin := ctrconf.PluginOf(l.DumpKey)
		var out []string
		for _, f := range t.Files[pos[l.File]+1:] {
			if f.Missing || f.Path == t.Main {
				continue
			}
			if plugin != "" && !slices.Contains(f.Plugins, plugin) {
				continue
			}
			if _, writes := f.EffectiveKeys(major)[l.DumpKey]; writes {
				continue
			}
			out = append(out, f.Path)
		}
		return out
	}
	var open []search
	var first [][]string
	for i, l := range lost {
		c := candsOf(l)
		if len(c) == 0 {
			continue // overridden by a later file's own value, or unknown to containerd
		}
		open = append(open, search{key: i, cands: c})
		first = append(first, c)
	}
	if err := b.dump(first); err != nil {
		return nil, nil, 0, err
	}
	var active []search
	for _, s := range open {
		if b.back(s.cands, lost[s.key]) {
			active = append(active, s)
		}
	}
	found, err := groupSearch(active, b.dump, func(set []string, key int) bool { return b.back(set, lost[key]) })
	if err != nil {
		return nil, nil, 0, err
	}
	// One unit per set of hiding files; the set's removal is dumped and
	// must bring back every value credited to it.
	bySet := map[string]*unit{}
	var order []string
	var sets [][]string
	for i := range lost {
		fs, ok := found[i]
		if !ok {
			continue
		}
		slices.Sort(fs)
		fs = slices.Compact(fs)
		found[i] = fs
		sets = append(sets, fs)
	}
	if err := b.dump(sets); err != nil {
		return nil, nil, 0, err
	}
	var shadowed []ctrconf.LostKey
	for i, l := range lost {
		fs, ok := found[i]
		if !ok {
			continue
		}
		lk := ctrconf.LostKey{Key: l.DumpKey, File: l.File, Written: l.Written, Effective: l.Effective, Absent: l.Absent,
			Winner: fs[len(fs)-1], Cause: ctrconf.CauseDropped,
			Reason: "hidden by " + strings.Join(fs, " and ") + " (measured by removing groups of files)"}
		if !l.Absent {
			lk.Cause = ctrconf.CauseReset
		}
		if !b.back(fs, l) {
			// The halves each needed the other removed, and together
			// they still do not bring it back: not a set this search can
			// name; it stays hidden, as a value no removal brings back.
			continue
		}
		shadowed = append(shadowed, lk)
		k := setKey(fs)
		u := bySet[k]
		if u == nil {
			u = &unit{files: fs, without: b.without(fs)}
			bySet[k] = u
			order = append(order, k)
		}
		u.keys = append(u.keys, lk)
	}
	var units []unit
	for _, k := range order {
		u := bySet[k]
		u.restored = restoredChanges(base, u.without, u.keys)
		units = append(units, *u)
	}
	return units, shadowed, b.staged, nil
}
