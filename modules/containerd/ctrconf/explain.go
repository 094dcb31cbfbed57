package ctrconf

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

// Shadow is a file that hides values other files set: removing it from the
// tree brings them back. One Shadow is reported per file and plugin.
type Shadow struct {
	File   string `json:"file"`
	Plugin string `json:"plugin,omitempty"`
	// Restored are the keys that come back, Before with the file present
	// (absent: "") and After without it. Keys the file writes itself are
	// not listed: changing those is what the file is for.
	Restored []module.EffectiveChange `json:"restored"`
}

// Ablate dumps the tree as it is and, in the same Stage round trip, once
// without each imported file (the file and the import naming it left out).
// containerdBin overrides t.Bin when set. When the tree itself does not load,
// base says why and there are no shadows.
func Ablate(ctx context.Context, h transport.Reader, t *Tree, containerdBin string) (base *Effective, shadows []Shadow, err error) {
	vs := []variant{{}}
	for _, f := range t.Files[1:] {
		vs = append(vs, variant{exclude: map[string]bool{f.Path: true}})
	}
	effs, err := dumpVariants(ctx, h, t, containerdBin, vs)
	if err != nil {
		return nil, nil, err
	}
	return effs[0], shadowsOf(t, effs[0], effs[1:]), nil
}

// shadowsOf compares the base dump with one ablation per imported file.
func shadowsOf(t *Tree, base *Effective, ablated []*Effective) []Shadow {
	if !base.OK {
		return nil
	}
	b := base.flat()
	major := binMajor(t.BinVersion)
	var out []Shadow
	for i, f := range t.Files[1:] {
		a := ablated[i]
		if a == nil || !a.OK {
			// Not measured (nothing it could bring back), or the tree
			// does not load without it.
			continue
		}
		// What the file writes, named as this daemon's dump names it: on
		// 2.x a version 2 (or unversioned) drop-in's registry config_path
		// is the images plugin's, and overriding an earlier file's value
		// with its own is not hiding it.
		own := f.effectiveKeys(major)
		byPlugin := map[string][]module.EffectiveChange{}
		for k, av := range a.flat() {
			if bv, ok := b[k]; ok && bv == av {
				continue
			}
			if _, writes := own[k]; writes || k == "imports" {
				// imports lists the files loaded: that it changes when a
				// file is left out is the experiment, not a finding.
				continue
			}
			byPlugin[pluginOf(k)] = append(byPlugin[pluginOf(k)], change(k, b[k], av))
		}
		for _, p := range sortedKeysOf(byPlugin) {
			r := byPlugin[p]
			sort.Slice(r, func(x, y int) bool { return r[x].Key < r[y].Key })
			out = append(out, Shadow{File: f.Path, Plugin: p, Restored: r})
		}
	}
	return out
}

// historyVariants are what attribution reads: [0] the built-in defaults
// (an empty config of the tree's version), then [k] the tree restricted to
// its first k files in load order, k = 1..n (the last is the whole tree).
func historyVariants(t *Tree) []variant {
	vs := []variant{{defaults: true}}
	for k := 1; k <= len(t.Files); k++ {
		ex := map[string]bool{}
		for _, f := range t.Files[k:] {
			ex[f.Path] = true
		}
		vs = append(vs, variant{exclude: ex})
	}
	return vs
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// KeyOrigin says where one effective value comes from.
type KeyOrigin struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// File wrote the value; "" when it is containerd's built-in default.
	File string `json:"file,omitempty"`
	// Default is set when the value equals the built-in default (a file
	// may still have written it).
	Default bool `json:"default,omitempty"`
	// ResetBy is, for a default that an earlier file had changed, the
	// file whose loading put the default back (on containerd 1.x: the file
	// that replaced the whole plugin table).
	ResetBy string `json:"reset_by,omitempty"`
	// Inferred is set when the measured writer does not spell the key
	// itself (a value containerd derives, or a key written another way).
	Inferred bool `json:"inferred,omitempty"`
}

// LostKey is a value a file writes that is not in effect.
type LostKey struct {
	Key  string `json:"key"`
	File string `json:"file"`
	// Written is the value in File; Effective is what containerd uses
	// ("" with Absent set when the key is not effective at all).
	Written   string `json:"written"`
	Effective string `json:"effective,omitempty"`
	Absent    bool   `json:"absent,omitempty"`
	// Winner is the file that decided the effective value or removed the
	// key; "" when no file did (containerd does not know the key).
	Winner string `json:"winner,omitempty"`
	Reason string `json:"reason"`
	// Cause classifies Reason: one of the Cause constants.
	Cause string `json:"cause"`
}

// ParseFailure is a file that is not valid TOML.
type ParseFailure struct {
	File string `json:"file"`
	Err  string `json:"error"`
}

// Explanation is the answer to "where does my effective containerd config
// come from".
type Explanation struct {
	Main       string `json:"main"`
	Version    int    `json:"version"`
	BinVersion string `json:"containerd,omitempty"`
	// Files are the files containerd loads, in order.
	Files []string `json:"files"`
	// Missing are imported files that do not exist.
	Missing []string `json:"missing,omitempty"`
	// Unloadable are paths of the tree containerd cannot read as a file
	// (a directory, a dangling symlink a glob matched): the daemon refuses
	// the tree, whatever 2.x's `config dump` prints.
	Unloadable []ParseFailure `json:"unloadable,omitempty"`
	// Unparseable are files that are not valid TOML.
	Unparseable []ParseFailure `json:"unparseable,omitempty"`
	// OK is set when containerd loads the tree; Err is its complaint
	// otherwise, and then only Files, Owners and Unparseable are filled.
	OK  bool   `json:"ok"`
	Err string `json:"error,omitempty"`
	// Owners maps each plugin a file mentions to the last file in load
	// order that mentions it: on containerd 1.x that file's table is the
	// whole of the plugin's configuration.
	Owners   map[string]string `json:"owners"`
	Keys     []KeyOrigin       `json:"keys,omitempty"`
	Shadows  []Shadow          `json:"shadows,omitempty"`
	Lost     []LostKey         `json:"lost,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
}

// Explain gathers the tree at mainPath and measures where every effective
// key comes from, in two Query round trips and one Stage round trip: the
// built-in defaults, the tree loaded one more file at a time (load-order
// prefixes), and the tree without each imported file. See the package
// documentation for how the measurements are read.
func Explain(ctx context.Context, h transport.Reader, mainPath, containerdBin string) (*Explanation, error) {
	t, err := Gather(ctx, h, mainPath, containerdBin)
	if err != nil {
		return nil, err
	}
	return ExplainTree(ctx, h, t)
}

// ExplainTree is Explain for a tree already gathered.
func ExplainTree(ctx context.Context, h transport.Reader, t *Tree) (*Explanation, error) {
	x, _, _, err := explainTree(ctx, h, t, false)
	return x, err
}

// explainTree measures t. With lazy set it stages only what a decision
// needs, in up to three Stage round trips (each answered from the run's
// earlier dumps where it can): the whole tree; when anything a file writes
// is out of effect, the defaults and the load-order prefixes; then the
// ablation of each file that took a written value out of effect (dropped
// it, or reset it to the default) — only such a file can bring one back
// by its absence. Without lazy it stages every measurement in one round
// trip, every imported file ablated (Explain's full answer).
func explainTree(ctx context.Context, h transport.Reader, t *Tree, lazy bool) (*Explanation, *Effective, []*Effective, error) {
	n := len(t.Files)
	x := &Explanation{Main: t.Main, Version: t.Version, BinVersion: t.BinVersion, Owners: map[string]string{}, Warnings: t.Warnings}
	for _, f := range t.Files {
		x.Files = append(x.Files, f.Path)
		if f.Unloadable != "" && f.Unloadable != "does not exist" {
			x.Unloadable = append(x.Unloadable, ParseFailure{File: f.Path, Err: f.Unloadable})
		} else if f.Missing {
			x.Missing = append(x.Missing, f.Path)
		} else if !f.Parses {
			x.Unparseable = append(x.Unparseable, ParseFailure{File: f.Path, Err: f.ParseErr})
		}
		for _, p := range f.Plugins {
			x.Owners[p] = f.Path
		}
	}

	// setBase records the whole tree's dump and says whether it loads. A
	// path of the tree that containerd cannot read makes it not: 2.x's
	// dump skips it (and every file after it); the daemon refuses to
	// start. The dump is not the daemon there.
	var defaults, base *Effective
	var prefixes, ablated []*Effective
	setBase := func(e *Effective) bool {
		base = e
		if base.OK {
			for _, u := range t.Undecidable() {
				if !u.Parse {
					base = &Effective{Err: fmt.Sprintf("containerd cannot load %s: it %s", u.Path, u.Why)}
					break
				}
			}
		}
		x.OK, x.Err = base.OK, base.Err
		return base.OK
	}
	major := binMajor(t.BinVersion)
	if lazy {
		effs, err := dumpVariants(ctx, h, t, t.Bin, []variant{{}})
		if err != nil {
			return nil, nil, nil, err
		}
		if !setBase(effs[0]) {
			return x, base, nil, nil
		}
		if !anyLost(t, base, major) {
			// Every value every file writes is in effect: nothing is
			// shadowed, nothing is lost, and no attribution is needed.
			return x, base, make([]*Effective, n-1), nil
		}
		if effs, err = dumpVariants(ctx, h, t, t.Bin, historyVariants(t)); err != nil {
			return nil, nil, nil, err
		}
		defaults, prefixes = effs[0], effs[1:]
	} else {
		// The history, then one ablation per imported file.
		vs := historyVariants(t)
		for _, f := range t.Files[1:] {
			vs = append(vs, variant{exclude: map[string]bool{f.Path: true}})
		}
		effs, err := dumpVariants(ctx, h, t, t.Bin, vs)
		if err != nil {
			return nil, nil, nil, err
		}
		defaults, prefixes, ablated = effs[0], effs[1:n+1], effs[n+1:]
		if !setBase(prefixes[n-1]) {
			return x, base, nil, nil
		}
	}
	if !defaults.OK {
		return nil, nil, nil, fmt.Errorf("%s: containerd cannot dump its own defaults: %s", h.Host(), defaults.Err)
	}

	// hist[k] is the flattened dump after k files (hist[0]: defaults); a
	// prefix that did not load is treated as unchanged from the one before.
	hist := make([]map[string]string, n+1)
	hist[0] = defaults.flat()
	for k := 1; k <= n; k++ {
		hist[k] = prefixes[k-1].flat()
		if !prefixes[k-1].OK {
			hist[k] = hist[k-1]
		}
	}
	final := hist[n]

	// spelled[j] is what file j writes, named as this daemon's dump names
	// it (2.x renames what version 2 files say about the CRI plugin).
	spelled := make([]map[string]string, n)
	for j, f := range t.Files {
		spelled[j] = f.effectiveKeys(major)
	}
	origin := map[string]KeyOrigin{}
	for key, val := range final {
		o := KeyOrigin{Key: key, Value: shown(key, val)}
		dv, dok := hist[0][key]
		o.Default = dok && dv == val
		last := lastChange(hist, key) // file index, -1 when never changed
		writer := -1
		for j := n - 1; j >= 0 && j >= last; j-- {
			if w, ok := spelled[j][key]; ok && (w == val || sameDecoded(val, w)) {
				writer = j
				break
			}
		}
		switch {
		case writer >= 0:
			o.File = t.Files[writer].Path
		case last < 0:
		case o.Default:
			o.ResetBy = t.Files[last].Path
		default:
			o.File = t.Files[last].Path
			o.Inferred = true
		}
		origin[key] = o
		x.Keys = append(x.Keys, o)
	}
	sort.Slice(x.Keys, func(i, j int) bool { return x.Keys[i].Key < x.Keys[j].Key })

	x.Lost = lostKeys(t, hist, origin, major)
	sortLost(t, x.Lost)
	if lazy {
		ablated = make([]*Effective, n-1)
		var vs []variant
		var at []int
		for i, f := range t.Files[1:] {
			if slices.ContainsFunc(x.Lost, func(l LostKey) bool { return l.Shadowed() && l.Winner == f.Path }) {
				vs = append(vs, variant{exclude: map[string]bool{f.Path: true}})
				at = append(at, i)
			}
		}
		if len(vs) > 0 {
			effs, err := dumpVariants(ctx, h, t, t.Bin, vs)
			if err != nil {
				return nil, nil, nil, err
			}
			for j, i := range at {
				ablated[i] = effs[j]
			}
		}
	}
	x.Shadows = shadowsOf(t, base, ablated)
	return x, base, ablated, nil
}

// lastChange is the index of the last file whose loading changed key (its
// value or its presence), -1 when no file did.
func lastChange(hist []map[string]string, key string) int {
	for k := len(hist) - 1; k >= 1; k-- {
		a, aok := hist[k][key]
		b, bok := hist[k-1][key]
		if aok != bok || a != b {
			return k - 1
		}
	}
	return -1
}

// lowerKeys maps each key of a flattened dump in lower case to the key.
func lowerKeys(final map[string]string) map[string]string {
	lower := make(map[string]string, len(final))
	for k := range final {
		lower[strings.ToLower(k)] = k
	}
	return lower
}

// lostIn says whether the value f writes at key is out of effect in the
// final dump, and under which name and with which value the dump has it
// (ok false: absent).
func lostIn(f *File, key string, final, lower map[string]string, major int) (ekey, ev string, ok, lost bool) {
	w := f.keys[key]
	ekey = key
	if nk, nv, mig := migratedKey(key, w, f.Version, major); mig {
		// The dump shows the value under its 2.x name.
		ekey, w = nk, nv
	}
	ev, ok = final[ekey]
	if !ok {
		// containerd matches struct fields without regard to case.
		if k2, ok2 := lower[strings.ToLower(ekey)]; ok2 {
			ekey, ev, ok = k2, final[k2], true
		}
	}
	if ok && (ev == w || arrayContains(ev, w) || sameDecoded(ev, w) || FilledByCRI(ekey, ev, w)) {
		return ekey, ev, ok, false
	}
	if w == "{}" {
		// An empty table sets no value (what is left of a runtimes
		// table once its runtimes moved elsewhere).
		return ekey, ev, ok, false
	}
	if !ok && zeroText(w) && optionsKey(key) {
		// A runtime's options are decoded into the shim's options
		// struct: an option absent from the effective config is its
		// zero value, so a zero written and dropped is what the shim
		// gets anyway.
		return ekey, ev, ok, false
	}
	return ekey, ev, ok, true
}

// anyLost reports whether any value a file of t writes is out of effect in
// the dump of the whole tree: exactly when lostKeys finds something.
func anyLost(t *Tree, base *Effective, major int) bool {
	final, lower := base.flat(), base.lowerFlat()
	for i := range t.Files {
		f := &t.Files[i]
		for key := range f.keys {
			if _, _, _, lost := lostIn(f, key, final, lower, major); lost {
				return true
			}
		}
	}
	return false
}

// lostKeys lists what each file writes that containerd does not use.
func lostKeys(t *Tree, hist []map[string]string, origin map[string]KeyOrigin, major int) []LostKey {
	final := hist[len(hist)-1]
	lower := lowerKeys(final)
	var out []LostKey
	for _, f := range t.Files {
		for _, key := range sortedKeysOf(f.keys) {
			written := f.keys[key]
			ekey, ev, ok, isLost := lostIn(&f, key, final, lower, major)
			if !isLost {
				continue
			}
			l := LostKey{Key: key, File: f.Path, Written: shown(key, written), Effective: shown(key, ev), Absent: !ok}
			if ok {
				o := origin[ekey]
				switch {
				case o.File != "" && !o.Inferred:
					l.Winner, l.Cause = o.File, CauseOverridden
					l.Reason = "overridden by " + o.File
				case o.File != "":
					// The last change came from a file that does not
					// spell the key (a value containerd derives).
					l.Winner, l.Cause = o.File, CauseOverridden
					l.Reason = "changed when " + o.File + " was loaded"
				case o.ResetBy != "":
					l.Winner, l.Cause = o.ResetBy, CauseReset
					l.Reason = "reset to the default by " + o.ResetBy + ", which replaces the whole plugin table"
				default:
					l.Cause = CauseDefault
					l.Reason = "containerd uses its default"
				}
			} else if k := lastRemoval(hist, ekey); k >= 0 {
				l.Winner, l.Cause = t.Files[k].Path, CauseDropped
				l.Reason = "dropped when " + l.Winner + " was loaded"
				if p := pluginOf(key); p != "" && l.Winner != f.Path {
					l.Reason += ", which replaces the whole " + p + " table"
				}
			} else {
				l.Cause = CauseUnknown
				l.Reason = "never effective: containerd does not know this key"
			}
			out = append(out, l)
		}
	}
	return out
}

// lastRemoval is the index of the file whose loading last removed key, -1
// when the key was never effective.
func lastRemoval(hist []map[string]string, key string) int {
	for k := len(hist) - 1; k >= 1; k-- {
		_, now := hist[k][key]
		_, before := hist[k-1][key]
		if before && !now {
			return k - 1
		}
	}
	return -1
}

// arrayContains reports whether the effective array holds every element of
// the written one: containerd 1.x appends top-level arrays across files.
func arrayContains(effective, written string) bool {
	if !strings.HasPrefix(effective, "[") || !strings.HasPrefix(written, "[") {
		return false
	}
	have := map[string]bool{}
	for _, e := range splitArray(effective) {
		have[e] = true
	}
	for _, w := range splitArray(written) {
		if !have[w] {
			return false
		}
	}
	return true
}

// splitArray splits a canonical array of scalars; nested arrays or tables
// fall back to the whole text.
func splitArray(s string) []string {
	inner := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if inner == "" {
		return nil
	}
	if strings.ContainsAny(inner, "[{") {
		return []string{s}
	}
	return strings.Split(inner, ", ")
}

// optionsKey reports whether key is an option of a runtime (a key directly
// under a runtime's `options` table).
func optionsKey(key string) bool {
	segs := SplitKey(key)
	return len(segs) >= 3 && segs[len(segs)-2] == "options" && slices.Contains(segs, "runtimes")
}

// FilledByCRI reports whether two texts of a dump key are the same setting
// once the CRI plugin has validated its config: `config dump` prints what the
// files say, and the CRI plugin then fills some empty fields (containerd 1.7
// and 2.x ValidatePluginConfig: a runtime's empty sandbox_mode, 2.x's
// sandboxer, is "podsandbox"). Without this, a run that moves a runtime's
// table between files shows `podsandbox -> ""` as a changed setting.
func FilledByCRI(key, a, b string) bool {
	segs := SplitKey(key)
	n := len(segs)
	if n < 3 || segs[n-3] != "runtimes" || segs[n-1] != "sandbox_mode" && segs[n-1] != "sandboxer" {
		return false
	}
	podsandbox := func(v string) bool { v = strings.Trim(v, `"'`); return v == "" || v == "podsandbox" }
	return podsandbox(a) && podsandbox(b)
}

// sameDecoded reports whether the written value text decodes to the
// effective one once containerd has filled in its struct fields: an array of
// tables (1.7's transfer unpack_config) comes back from a 2.x dump with every
// field of the struct, the ones the file did not write at their zero value.
// Both are canonical texts (see canonical); a text that does not parse back
// is not the same.
func sameDecoded(effective, written string) bool {
	if !strings.ContainsAny(written, "[{") {
		return false
	}
	var e, w map[string]any
	if toml.Unmarshal([]byte("v = "+effective), &e) != nil || toml.Unmarshal([]byte("v = "+written), &w) != nil {
		return false
	}
	return covers(e["v"], w["v"])
}

// covers reports whether eff holds everything w says, any further table
// field of eff being a zero value.
func covers(eff, w any) bool {
	switch wv := w.(type) {
	case []any:
		ev, ok := eff.([]any)
		if !ok || len(ev) != len(wv) {
			return false
		}
		for i := range wv {
			if !covers(ev[i], wv[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		ev, ok := eff.(map[string]any)
		if !ok {
			return false
		}
		for k, x := range wv {
			if !covers(ev[k], x) {
				return false
			}
		}
		for k, x := range ev {
			if _, said := wv[k]; !said && !zeroText(canonical(x)) {
				return false
			}
		}
		return true
	}
	return canonical(eff) == canonical(w)
}
