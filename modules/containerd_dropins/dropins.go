// Package containerddropins is the `containerd_dropins` module: it finds, by
// measurement, every imported drop-in whose presence makes effective values
// that earlier files set disappear or fall back to defaults, and moves such
// a file out of every import glob — but only after proving with the node's
// own containerd that every value the file contributes is still in effect
// without it. This is the incident's fix ("remove one file at a time and
// measure") made a module.
package containerddropins

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
)

func init() {
	module.Register(module.Registration{Name: "containerd_dropins", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// Args are the module's arguments.
type Args struct {
	Config        string   `yaml:"config"`
	QuarantineDir string   `yaml:"quarantine_dir"`
	Protect       []string `yaml:"protect"`
	Mode          string   `yaml:"mode"`
	Containerd    string   `yaml:"containerd"`
	// Absorb consolidates: settings that would be lost (a moved drop-in's
	// own settings, or an earlier file's settings that a protected drop-in
	// hides) are written into the file that owns the plugin, validated
	// with the node's containerd before anything moves. On by default;
	// the absorbing file is rewritten by a TOML encoder and loses its
	// comments and layout, so `absorb: false` refuses instead.
	Absorb bool `yaml:"absorb"`
	// AcceptShadowed lists effective keys (Flatten keys such as
	// plugins."io.containerd.grpc.v1.cri".registry.mirrors, a table
	// covering every key below it, or a path.Match pattern) that may stay
	// written but out of effect. Any other value a loaded file writes and
	// another file hides is consolidated or refused.
	AcceptShadowed []string `yaml:"accept_shadowed"`
}

// Validate checks what a type cannot.
func (a *Args) Validate() error {
	if a.Mode != "relocate" && a.Mode != "report" {
		return fmt.Errorf("mode must be relocate or report, not %q", a.Mode)
	}
	for _, p := range []string{a.Config, a.QuarantineDir} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("path %q must be absolute", p)
		}
	}
	for _, k := range a.AcceptShadowed {
		if _, err := path.Match(k, ""); err != nil {
			return fmt.Errorf("accept_shadowed %q: %w", k, err)
		}
	}
	return nil
}

// Module implements module.Module.
type Module struct{}

// NewArgs returns the defaults.
func (Module) NewArgs() module.Args {
	return &Args{
		Config:        "/etc/containerd/config.toml",
		QuarantineDir: "/etc/containerd/conf.d.disabled",
		Mode:          "relocate",
		Containerd:    ctrconf.DefaultBin,
		Absorb:        true,
	}
}

func (a *Args) protected(path string) bool {
	for _, p := range a.Protect {
		if p == path || p == filepath.Base(path) {
			return true
		}
	}
	return false
}

// accepted reports whether the play accepts key staying out of effect.
func (a *Args) accepted(key string) bool {
	for _, k := range a.AcceptShadowed {
		if k == key || strings.HasPrefix(key, k+".") {
			return true
		}
		if ok, err := path.Match(k, key); err == nil && ok {
			return true
		}
	}
	return false
}

// Prefetch is what Check reads before its first round trip of its own.
func (Module) Prefetch(ma module.Args) transport.Query {
	a := ma.(*Args)
	return ctrconf.PrefetchQuery(a.Config, a.Containerd)
}

// NoteSuffix names the note left beside a relocated file.
const NoteSuffix = ".nodeconverge-note"

// maxSearch bounds the variants staged to find shadowing sets larger than
// one file (all of them in one Stage round trip).
const maxSearch = 64

// unit is a set of files that together hide values: removing all of them
// brings the values back, removing fewer does not.
type unit struct {
	files    []string
	restored []module.EffectiveChange
	// keys are the shadowed lost keys this unit accounts for.
	keys []ctrconf.LostKey
	// without is the dump of the tree without the unit's files.
	without *ctrconf.Effective
}

// Check measures which drop-ins hide values other files write, and plans
// what makes every written value effective again: relocating the shadowing
// files, absorbing what moving them would lose into the file that owns the
// plugin, or, for a protected file, absorbing the values it hides into it.
// Everything is proven on a staged candidate with the node's containerd.
func (Module) Check(ctx context.Context, h transport.Reader, ma module.Args) (*module.Plan, error) {
	a := ma.(*Args)
	tree, err := ctrconf.Gather(ctx, h, a.Config, a.Containerd)
	if err != nil {
		return nil, fmt.Errorf("read containerd config: %w", err)
	}
	plan := &module.Plan{}
	if und := tree.Undecidable(); len(und) > 0 {
		// Nothing about this tree can be measured: containerd refuses it
		// (and 2.x's dump would pretend otherwise). Such a path is not
		// moved; a later task may repair it (containerd_nvidia repairs
		// duplicated tables), and the restart's gates judge the result.
		plan.Skip = undecidableText(und)
		return plan, nil
	}
	var base *ctrconf.Effective
	var an *ctrconf.Analysis
	if len(tree.Files) > largeTree {
		if base, err = ctrconf.Dump(ctx, h, tree, nil); err != nil {
			return nil, fmt.Errorf("dump live config: %w", err)
		}
	} else {
		if an, err = ctrconf.Analyze(ctx, h, tree); err != nil {
			return nil, fmt.Errorf("measure drop-ins: %w", err)
		}
		base = an.Base
	}
	if !base.OK {
		return nil, &module.ValidationError{Msg: fmt.Sprintf("the live containerd config of %s does not load, so no drop-in can be measured:\n%s\n"+
			"repair it first (containerd_nvidia with path: auto, state: repair fixes nvidia tables pasted twice)", h.Host(), base.Err)}
	}
	var shadowed []ctrconf.LostKey
	var units []unit
	if an == nil {
		var dumps int
		if units, shadowed, dumps, err = bisectUnits(ctx, h, tree, base); err != nil {
			return nil, err
		}
		plan.Notes = append(plan.Notes, fmt.Sprintf("%d loaded files: measured by removing groups of files, %d containerd config dumps in stages of at most %d (one file at a time takes %d)",
			len(tree.Files), dumps, stageChunk, 2*len(tree.Files)))
	} else {
		for _, l := range an.Lost {
			if l.Shadowed() {
				shadowed = append(shadowed, l)
			}
		}
		if units, err = findUnits(ctx, h, tree, an, shadowed); err != nil {
			return nil, err
		}
	}
	if len(units) == 0 && len(shadowed) == 0 {
		return plan, nil
	}

	over := ctrconf.Overrides{}
	absorbed := map[string]map[string]any{} // absorbing file -> its parsed content
	var absorbNotes, refusals []string
	absorbInto := func(target *ctrconf.File, from string, keys []string, value func(string) (any, bool)) error {
		m := absorbed[target.Path]
		if m == nil {
			if err := toml.Unmarshal(target.Content, &m); err != nil {
				return fmt.Errorf("parse %s: %w", target.Path, err)
			}
			absorbed[target.Path] = m
		}
		// A file earlier in load order than the target loses to what the
		// target spells itself (as it would with the shadowing file gone);
		// a later one wins.
		earlier := fileIndex(tree, from) < fileIndex(tree, target.Path)
		var took []string
		for _, k := range keys {
			v, ok := value(k)
			if !ok {
				return fmt.Errorf("%s: cannot read %s", from, k)
			}
			if earlier && hasPath(m, ctrconf.SplitKey(k)) {
				continue
			}
			setPath(m, ctrconf.SplitKey(k), v)
			took = append(took, k)
		}
		if len(took) == 0 {
			return nil
		}
		keys = took
		absorbNotes = append(absorbNotes, fmt.Sprintf("%s absorbs from %s: %s", target.Path, from, strings.Join(keys, ", ")))
		return nil
	}
	var moved []unit
	for _, u := range units {
		var prot, movable []string
		hasMain := false
		for _, f := range u.files {
			switch {
			case f == tree.Main:
				hasMain = true
			case a.protected(f):
				prot = append(prot, f)
			default:
				movable = append(movable, f)
			}
		}
		if hasMain {
			plan.Notes = append(plan.Notes, "the main config shadows earlier values; it is never moved")
			continue
		}
		if len(prot) > 0 {
			// A protected file stays; what it hides moves into it.
			if len(u.keys) == 0 {
				plan.Notes = append(plan.Notes, fmt.Sprintf("%s shadows %s but is protected", strings.Join(prot, " and "), summary(u.restored)))
				continue
			}
			keys := notAccepted(a, u.keys)
			if len(keys) == 0 {
				continue
			}
			if !a.Absorb {
				refusals = append(refusals, fmt.Sprintf("%s is protected and hides what earlier files write (absorb: true would write these into it):\n%s", strings.Join(prot, " and "), lostKeysText(keys)))
				continue
			}
			target := tree.File(prot[len(prot)-1])
			if !target.Parses {
				refusals = append(refusals, fmt.Sprintf("%s is protected, hides values and does not parse", target.Path))
				continue
			}
			for _, byFile := range groupByFile(keys) {
				src := tree.File(byFile[0].File)
				if err := absorbInto(target, src.Path, keyNames(byFile), src.Value); err != nil {
					return nil, err
				}
			}
			if len(movable) == 0 {
				continue
			}
		}
		u.files = movable
		moved = append(moved, u)
		for _, p := range movable {
			over[p] = nil
		}
		for _, p := range movable {
			f := tree.File(p)
			lost, err := lostKeys(f, base, u.without)
			if err != nil {
				return nil, err
			}
			if len(lost) == 0 {
				continue
			}
			if !a.Absorb {
				refusals = append(refusals, fmt.Sprintf("%s shadows %s, but moving it would lose (absorb: true would move them into the file that owns the plugin):\n%s", p, summary(u.restored), lostText(lost)))
				continue
			}
			byPlugin := map[string][]lostValue{}
			for _, l := range lost {
				byPlugin[ctrconf.PluginOf(l.key)] = append(byPlugin[ctrconf.PluginOf(l.key)], l)
			}
			for _, plugin := range sortedKeys(byPlugin) {
				ls := byPlugin[plugin]
				owner := ownerBefore(tree, p, plugin, u.files)
				if owner == nil || !owner.Parses {
					refusals = append(refusals, fmt.Sprintf("%s: no parseable earlier file owns %s to absorb its settings:\n%s", p, plugin, lostText(ls)))
					continue
				}
				vals := map[string]any{}
				for _, l := range ls {
					vals[l.key] = l.value
				}
				if err := absorbInto(owner, p, lostNames(ls), func(k string) (any, bool) { v, ok := vals[k]; return v, ok }); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(refusals) > 0 {
		return nil, &module.ValidationError{Msg: "refusing to relocate; nothing was changed:\n  " + strings.Join(refusals, "\n  "), Evidence: plan.Evidence}
	}
	var ownerFiles []module.FileChange
	for _, p := range sortedKeys(absorbed) {
		body, err := toml.Marshal(absorbed[p])
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", p, err)
		}
		content := append([]byte("# Rewritten by nodeconverge (containerd_dropins absorb): settings that were out of effect moved here.\n"), body...)
		over[p] = content
		before := tree.File(p).Content
		ownerFiles = append(ownerFiles, module.FileChange{Action: module.Update, Path: p, Before: before, After: content,
			BeforeHash: module.Hash(before), AfterHash: module.Hash(content), Reasons: []string{"absorbs settings that were out of effect"}})
	}
	if len(over) == 0 {
		// Nothing to move or absorb: what stays hidden must be accepted.
		if rest := notAccepted(a, shadowed); len(rest) > 0 {
			return nil, &module.ValidationError{Msg: "values written in loaded files are out of effect and no relocation brings them back; nothing was changed:\n" +
				lostKeysText(rest) + "\n  accept them with accept_shadowed: [key, ...] or remove them from the files", Evidence: plan.Evidence}
		}
		return plan, nil
	}

	// Prove the candidate: it loads, every moved file's values are still in
	// effect, and nothing any remaining file writes is hidden.
	cand, err := ctrconf.CandidateTree(tree, over)
	if err != nil {
		return nil, err
	}
	var final *ctrconf.Effective
	var hidden []ctrconf.LostKey
	if len(cand.Files) > largeTree {
		if final, err = ctrconf.Dump(ctx, h, cand, nil); err != nil {
			return nil, fmt.Errorf("dump the candidate: %w", err)
		}
		if final.OK {
			if _, hidden, _, err = bisectUnits(ctx, h, cand, final); err != nil {
				return nil, fmt.Errorf("measure the candidate: %w", err)
			}
		}
	} else {
		an2, err := ctrconf.Analyze(ctx, h, cand)
		if err != nil {
			return nil, fmt.Errorf("measure the candidate: %w", err)
		}
		final = an2.Base
		for _, l := range an2.Lost {
			if l.Shadowed() {
				hidden = append(hidden, l)
			}
		}
	}
	var still []string
	for _, u := range moved {
		for _, p := range u.files {
			lost, err := lostKeys(tree.File(p), base, final)
			if err != nil {
				return nil, err
			}
			if len(lost) > 0 {
				still = append(still, p+" (moved) would lose:\n"+lostText(lost))
			}
		}
	}
	if rest := notAccepted(a, hidden); len(rest) > 0 {
		still = append(still, "still written but out of effect:\n"+lostKeysText(rest)+"\n  accept them with accept_shadowed: [key, ...], or repair the files by hand")
	}
	if c := ctrconf.RegistryConflict(final); c != "" && ctrconf.RegistryConflict(base) == "" {
		// config dump accepts this; the CRI plugin refuses to start on it.
		still = append(still, c)
	}
	plan.Evidence = append(plan.Evidence, module.Evidence{
		What:    fmt.Sprintf("the candidate tree loads (%v) and every value a loaded or moved file writes is in effect (%v)", final.OK, len(still) == 0),
		Command: tree.Bin + " --config <staged candidate tree> config dump", OK: final.OK && len(still) == 0, Required: true})
	if !final.OK {
		return nil, &module.ValidationError{Msg: "refusing to relocate; nothing was changed: the candidate tree does not load: " + final.Err, Evidence: plan.Evidence}
	}
	if len(still) > 0 {
		return nil, &module.ValidationError{Msg: "refusing to relocate; nothing was changed: with the planned moves\n  " + strings.Join(still, "\n  "), Evidence: plan.Evidence}
	}
	plan.Notes = append(plan.Notes, absorbNotes...)
	plan.Files = append(plan.Files, ownerFiles...)
	plan.Effective = ctrconf.Attribute(tree, ctrconf.Diff(base, final))
	if a.Mode == "report" {
		for _, u := range moved {
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s shadows %s (mode report: not moved)", strings.Join(u.files, " and "), summary(u.restored)))
		}
		plan.Files = nil
		plan.Skip = fmt.Sprintf("%d shadowing drop-in(s) found; mode report moves nothing", len(moved))
		return plan, nil
	}
	// A file can belong to several units (alone it hides one plugin's
	// values, with a protected file another's): it moves once, its note
	// naming everything it hid.
	hid := map[string][]string{}
	for _, u := range moved {
		for _, p := range u.files {
			hid[p] = append(hid[p], summary(u.restored))
		}
	}
	emitted := map[string]bool{}
	for _, u := range moved {
		for _, p := range u.files {
			if emitted[p] {
				continue
			}
			emitted[p] = true
			f := tree.File(p)
			dest := filepath.Join(a.QuarantineDir, filepath.Base(p))
			for _, g := range tree.Imports {
				ok, err := filepath.Match(g, dest)
				if err != nil {
					return nil, fmt.Errorf("import glob %q: %w", g, err)
				}
				if ok || g == dest {
					return nil, fmt.Errorf("quarantine_dir %s is inside the import %s; the moved file would still load", a.QuarantineDir, g)
				}
			}
			plan.Files = append(plan.Files, module.FileChange{
				Action: module.Move, From: p, Path: dest, Before: f.Content, After: f.Content,
				BeforeHash: module.Hash(f.Content), AfterHash: module.Hash(f.Content), Mode: 0o644,
				Reasons: []string{"shadows " + strings.Join(hid[p], "; ")},
			})
			together := ""
			if len(u.files) > 1 {
				together = fmt.Sprintf("# It was moved together with %s: each of them alone hid the same values.\n", strings.Join(others(u.files, p), ", "))
			}
			note := []byte(fmt.Sprintf("# %s was moved here from %s by nodeconverge.\n# It shadowed, so containerd did not load: %s\n%s# Every value it sets is still in effect from another file (proven with %s config dump).\n# To undo: mv %s %s\n",
				filepath.Base(p), p, strings.Join(hid[p], "; "), together, tree.Bin, dest, p))
			plan.Files = append(plan.Files, module.FileChange{Action: module.Create, Path: dest + NoteSuffix, After: note, AfterHash: module.Hash(note), Mode: 0o644})
		}
	}
	if r := ctrconf.PlatformRefusal(tree, plan.Files); r != "" {
		return nil, &module.ValidationError{Msg: r, Evidence: plan.Evidence}
	}
	return plan, nil
}

// lost is one effective value a drop-in writes that removing it would
// change.
type lostValue struct {
	key   string
	segs  []string
	value any // as the drop-in writes it
	with  string
	after string
}

// lostKeys lists every effective value f writes that changes when f is
// removed (or, with absorb, is not carried by the candidate): the settings
// moving it would lose.
func lostKeys(f *ctrconf.File, with, without *ctrconf.Effective) ([]lostValue, error) {
	var m map[string]any
	if err := toml.Unmarshal(f.Content, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", f.Path, err)
	}
	delete(m, "version")
	delete(m, "imports")
	var out []lostValue
	walkLeaves(m, nil, func(segs []string, v any) {
		k := ctrconf.JoinKey(segs...)
		w, inWith := with.Get(k)
		wo, inWithout := without.Get(k)
		if inWith && (!inWithout || w != wo) {
			out = append(out, lostValue{key: k, segs: segs, value: v, with: w, after: orDefault(wo, inWithout)})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

func walkLeaves(m map[string]any, prefix []string, fn func([]string, any)) {
	for k, v := range m {
		segs := append(append([]string(nil), prefix...), k)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			walkLeaves(sub, segs, fn)
			continue
		}
		fn(segs, v)
	}
}

func lostNames(ls []lostValue) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.key
	}
	return out
}

// hasPath reports whether m holds a value at segs.
func hasPath(m map[string]any, segs []string) bool {
	for _, s := range segs[:len(segs)-1] {
		next, ok := m[s].(map[string]any)
		if !ok {
			return false
		}
		m = next
	}
	_, ok := m[segs[len(segs)-1]]
	return ok
}

// setPath sets v at segs in m, creating tables on the way.
func setPath(m map[string]any, segs []string, v any) {
	for _, s := range segs[:len(segs)-1] {
		next, ok := m[s].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[s] = next
		}
		m = next
	}
	m[segs[len(segs)-1]] = v
}

// ownerBefore is the last file before path, in load order, that mentions
// plugin and is not one of skip: on containerd 1.x the file that owns the
// plugin once path (and the files moved with it) are gone.
func ownerBefore(t *ctrconf.Tree, path, plugin string, skip []string) *ctrconf.File {
	var owner *ctrconf.File
	for i := range t.Files {
		f := &t.Files[i]
		if f.Path == path {
			break
		}
		if slices.Contains(skip, f.Path) {
			continue
		}
		if plugin == "" && f.Path == t.Main {
			owner = f
		}
		if slices.Contains(f.Plugins, plugin) {
			owner = f
		}
	}
	return owner
}

func orDefault(v string, ok bool) string {
	if !ok {
		return "absent"
	}
	return v
}

// orEmpty shows a value a dump prints as nothing (an absent key) as "".
func orEmpty(v string) string {
	if v == "" {
		return `""`
	}
	return v
}

// summary names the values a change brings back, the zero-valued fields of
// restored tables left out unless nothing else comes back.
func summary(cs []module.EffectiveChange) string {
	if len(cs) == 0 {
		return "nothing"
	}
	// Name the values that matter (BinaryName, SystemdCgroup = true), not
	// the zero-valued fields every restored table brings along.
	var keys []string
	for _, c := range cs {
		if c.ZeroAfter() {
			continue
		}
		keys = append(keys, c.Key+" = "+c.After)
	}
	if len(keys) == 0 {
		// Only zero values come back (a config_path of ""): name them
		// rather than an empty list.
		for _, c := range cs {
			keys = append(keys, c.Key+" = "+orEmpty(c.After))
		}
	}
	hidden := len(cs) - len(keys)
	if len(keys) > 6 {
		hidden += len(keys) - 6
		keys = keys[:6]
	}
	if hidden > 0 {
		return fmt.Sprintf("%s (and %d more)", strings.Join(keys, ", "), hidden)
	}
	return strings.Join(keys, ", ")
}

// Apply moves the files and writes the notes.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	var ops []transport.Op
	for _, f := range p.Files {
		switch f.Action {
		case module.Move:
			ops = append(ops, transport.Op{Kind: transport.OpMove, From: f.From, Path: f.Path, Backup: true})
		case module.Create, module.Update:
			ops = append(ops, transport.Op{Kind: transport.OpWrite, Path: f.Path, Content: f.After, Mode: f.Mode, Backup: true})
		}
	}
	if _, err := h.Apply(ctx, ops); err != nil {
		return nil, fmt.Errorf("relocate: %w", err)
	}
	return &module.Result{Changed: true, Files: p.Files}, nil
}
