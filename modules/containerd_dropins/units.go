package containerddropins

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
)

// findUnits turns the measurements into sets of files to act on: every file
// whose removal alone brings values back (one unit per file, however many
// plugins it hides), then, for hidden values no single removal brings back,
// the smallest set of files whose removal does (two identical shadowing
// drop-ins hide the same values; removing either one changes nothing). The
// search is bounded (maxSearch variants, sets of up to three files) and
// staged in one Stage round trip.
func findUnits(ctx context.Context, h transport.Reader, t *ctrconf.Tree, an *ctrconf.Analysis, shadowed []ctrconf.LostKey) ([]unit, error) {
	var units []unit
	explained := map[int]bool{} // index into shadowed
	byFile := map[string]int{}
	for _, s := range an.Shadows {
		i, ok := byFile[s.File]
		if !ok {
			i = len(units)
			byFile[s.File] = i
			units = append(units, unit{files: []string{s.File}, without: an.Without[fileIndex(t, s.File)-1]})
		}
		units[i].restored = append(units[i].restored, s.Restored...)
	}
	for i := range units {
		for k, l := range shadowed {
			if restores(t, units[i].without, l) {
				units[i].keys = append(units[i].keys, l)
				explained[k] = true
			}
		}
	}
	var open []ctrconf.LostKey
	for k, l := range shadowed {
		if !explained[k] {
			open = append(open, l)
		}
	}
	if len(open) == 0 {
		return units, nil
	}
	sets := candidateSets(t, open)
	if len(sets) == 0 {
		return units, nil
	}
	variants := make([]ctrconf.Overrides, len(sets))
	for i, set := range sets {
		o := ctrconf.Overrides{}
		for _, p := range set {
			o[p] = nil
		}
		variants[i] = o
	}
	effs, err := ctrconf.DumpMany(ctx, h, t, variants)
	if err != nil {
		return nil, fmt.Errorf("dump without sets of drop-ins: %w", err)
	}
	for len(open) > 0 {
		best, bestN := -1, 0
		for i, set := range sets {
			// Sets come smallest first: stop at the first size that
			// brings anything back.
			if best >= 0 && len(set) > len(sets[best]) {
				break
			}
			n := 0
			for _, l := range open {
				if restores(t, effs[i], l) {
					n++
				}
			}
			if n > bestN {
				best, bestN = i, n
			}
		}
		if best < 0 {
			break
		}
		u := unit{files: sets[best], without: effs[best]}
		var rest []ctrconf.LostKey
		for _, l := range open {
			if restores(t, effs[best], l) {
				u.keys = append(u.keys, l)
			} else {
				rest = append(rest, l)
			}
		}
		u.restored = restoredChanges(an.Base, effs[best], u.keys)
		units = append(units, u)
		open = rest
		sets = slices.Delete(sets, best, best+1)
		effs = slices.Delete(effs, best, best+1)
	}
	return units, nil
}

func fileIndex(t *ctrconf.Tree, p string) int {
	for i, f := range t.Files {
		if f.Path == p {
			return i
		}
	}
	return -1
}

// restores reports whether, in eff, the value l's file writes is in effect.
func restores(t *ctrconf.Tree, eff *ctrconf.Effective, l ctrconf.LostKey) bool {
	if eff == nil || !eff.OK {
		return false
	}
	w, ok := t.File(l.File).Written(l.Key)
	if !ok {
		return false
	}
	v, ok := eff.Get(l.Key)
	return ok && v == w
}

// restoredChanges are the keys' effective values before and after.
func restoredChanges(base, without *ctrconf.Effective, keys []ctrconf.LostKey) []module.EffectiveChange {
	var out []module.EffectiveChange
	for _, l := range keys {
		b, _ := base.Get(l.Key)
		a, _ := without.Get(l.Key)
		if ctrconf.Redact(l.Key) {
			b, a = ctrconf.Redacted, ctrconf.Redacted
		}
		out = append(out, module.EffectiveChange{Key: l.Key, Before: b, After: a})
	}
	return out
}

// candidateSets are the sets of two or three imported files to try removing
// together, smallest first, at most maxSearch: files loaded after a hidden
// value's file that mention its plugin (for a top-level key, any later
// file), since only those can hide it.
func candidateSets(t *ctrconf.Tree, open []ctrconf.LostKey) [][]string {
	pos := map[string]int{}
	for i, f := range t.Files {
		pos[f.Path] = i
	}
	var cands []string
	seen := map[string]bool{}
	for _, l := range open {
		plugin := ctrconf.PluginOf(l.Key)
		for _, f := range t.Files[pos[l.File]+1:] {
			if f.Path == t.Main || seen[f.Path] {
				continue
			}
			if plugin == "" || slices.Contains(f.Plugins, plugin) {
				seen[f.Path] = true
				cands = append(cands, f.Path)
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool { return pos[cands[i]] < pos[cands[j]] })
	var sets [][]string
	for size := 2; size <= 3 && size <= len(cands); size++ {
		var rec func(start int, cur []string)
		rec = func(start int, cur []string) {
			if len(sets) >= maxSearch {
				return
			}
			if len(cur) == size {
				sets = append(sets, slices.Clone(cur))
				return
			}
			for i := start; i < len(cands); i++ {
				rec(i+1, append(cur, cands[i]))
			}
		}
		rec(0, nil)
	}
	return sets
}
