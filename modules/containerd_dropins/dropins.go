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
	"path/filepath"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
)

func init() { module.Register("containerd_dropins", Module{}) }

// Args are the module's arguments.
type Args struct {
	Config        string   `yaml:"config"`
	QuarantineDir string   `yaml:"quarantine_dir"`
	Protect       []string `yaml:"protect"`
	Mode          string   `yaml:"mode"`
	Containerd    string   `yaml:"containerd"`
	// Absorb, when a shadowing drop-in carries settings no other file
	// has, moves those settings into the file that owns the plugin once
	// the drop-in is gone, validated the same way. Opt-in: that file is
	// rewritten by a TOML encoder and loses its comments and layout.
	Absorb bool `yaml:"absorb"`
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

// Prefetch is what Check reads before its first round trip of its own.
func (Module) Prefetch(ma module.Args) transport.Query {
	a := ma.(*Args)
	return ctrconf.PrefetchQuery(a.Config, a.Containerd)
}

// NoteSuffix names the note left beside a relocated file.
const NoteSuffix = ".nodeconverge-note"

// Check measures every drop-in's effect and plans the relocations that are
// proven safe.
func (Module) Check(ctx context.Context, h transport.Reader, ma module.Args) (*module.Plan, error) {
	a := ma.(*Args)
	tree, err := ctrconf.Gather(ctx, h, a.Config, a.Containerd)
	if err != nil {
		return nil, fmt.Errorf("read containerd config: %w", err)
	}
	base, shadows, err := ctrconf.Ablate(ctx, h, tree, "")
	if err != nil {
		return nil, fmt.Errorf("ablate drop-ins: %w", err)
	}
	plan := &module.Plan{}
	if !base.OK {
		return nil, &module.ValidationError{Msg: fmt.Sprintf("the live containerd config of %s does not load, so no drop-in can be measured:\n%s\n"+
			"repair it first (containerd_nvidia state=absent on the main config repairs duplicated nvidia tables)", h.Host(), base.Err)}
	}
	var movable []ctrconf.Shadow
	for _, s := range shadows {
		switch {
		case s.File == tree.Main:
			plan.Notes = append(plan.Notes, "the main config shadows earlier values; it is never moved")
		case a.protected(s.File):
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s shadows %d values but is protected", s.File, len(s.Restored)))
		default:
			movable = append(movable, s)
		}
	}
	if len(movable) == 0 {
		return plan, nil
	}
	// Prove it: the tree without each file alone, and without all of them.
	var variants []ctrconf.Overrides
	all := ctrconf.Overrides{}
	for _, s := range movable {
		variants = append(variants, ctrconf.Overrides{s.File: nil})
		all[s.File] = nil
	}
	if len(movable) > 1 {
		variants = append(variants, all)
	}
	effs, err := ctrconf.DumpMany(ctx, h, tree, variants)
	if err != nil {
		return nil, fmt.Errorf("dump without shadowing drop-ins: %w", err)
	}
	if len(movable) == 1 {
		// Without the one file is without all of them: the same tree,
		// dumped once. effs[len(effs)-1] below is that tree either way.
		effs = append(effs, effs[0])
	}
	var refusals []string
	absorbed := map[string]map[string]any{} // owner path -> its parsed content with absorbed keys
	var absorbNotes []string
	for i, s := range movable {
		f := tree.File(s.File)
		lost, err := lostKeys(f, base, effs[i])
		if err != nil {
			return nil, err
		}
		plan.Evidence = append(plan.Evidence, module.Evidence{
			What:    fmt.Sprintf("%s shadows %d effective values; without it every value it writes is still in effect: %v", s.File, len(s.Restored), len(lost) == 0),
			Command: tree.Bin + " --config <staged tree without " + s.File + "> config dump", OK: effs[i].OK && len(lost) == 0, Required: true,
		})
		if !effs[i].OK {
			refusals = append(refusals, fmt.Sprintf("%s: the tree without it does not load: %s", s.File, effs[i].Err))
			continue
		}
		if len(lost) == 0 {
			continue
		}
		if !a.Absorb {
			refusals = append(refusals, fmt.Sprintf("%s shadows %s, but moving it would lose:\n    %s\n  (absorb: true would move those settings into the file that owns the plugin)", s.File, summary(s.Restored), strings.Join(lostText(lost), "\n    ")))
			continue
		}
		owner := ownerBefore(tree, s.File, s.Plugin)
		if owner == nil || !owner.Parses {
			refusals = append(refusals, fmt.Sprintf("%s: no parseable earlier file owns %s to absorb its settings", s.File, s.Plugin))
			continue
		}
		m := absorbed[owner.Path]
		if m == nil {
			if err := toml.Unmarshal(owner.Content, &m); err != nil {
				return nil, fmt.Errorf("parse %s: %w", owner.Path, err)
			}
			absorbed[owner.Path] = m
		}
		for _, l := range lost {
			setPath(m, l.segs, l.value)
		}
		absorbNotes = append(absorbNotes, fmt.Sprintf("%s absorbs from %s: %s", owner.Path, s.File, strings.Join(lostKeyNames(lost), ", ")))
	}
	if len(refusals) > 0 {
		return nil, &module.ValidationError{Msg: "refusing to relocate; nothing was changed:\n  " + strings.Join(refusals, "\n  "), Evidence: plan.Evidence}
	}
	final := effs[len(effs)-1]
	var ownerFiles []module.FileChange
	if len(absorbed) > 0 {
		// Validate the absorbing files with the drop-ins gone, as one tree.
		over := ctrconf.Overrides{}
		for _, s := range movable {
			over[s.File] = nil
		}
		for path, m := range absorbed {
			body, err := toml.Marshal(m)
			if err != nil {
				return nil, fmt.Errorf("render %s: %w", path, err)
			}
			content := append([]byte("# Rewritten by nodeconverge (containerd_dropins absorb): settings of relocated drop-ins moved here.\n"), body...)
			over[path] = content
			before := tree.File(path).Content
			ownerFiles = append(ownerFiles, module.FileChange{Action: module.Update, Path: path, Before: before, After: content,
				BeforeHash: module.Hash(before), AfterHash: module.Hash(content), Reasons: []string{"absorbs settings of relocated drop-ins"}})
		}
		effs2, err := ctrconf.DumpMany(ctx, h, tree, []ctrconf.Overrides{over})
		if err != nil {
			return nil, fmt.Errorf("dump with absorbed settings: %w", err)
		}
		final = effs2[0]
		var still []string
		for _, s := range movable {
			lost, err := lostKeys(tree.File(s.File), base, final)
			if err != nil {
				return nil, err
			}
			still = append(still, lostText(lost)...)
		}
		plan.Evidence = append(plan.Evidence, module.Evidence{What: "absorbed settings are in effect without the relocated drop-ins",
			Command: tree.Bin + " --config <staged candidate tree> config dump", OK: final.OK && len(still) == 0, Required: true})
		if !final.OK || len(still) > 0 {
			return nil, &module.ValidationError{Msg: fmt.Sprintf("refusing to absorb; nothing was changed: the candidate tree %s", orLost(final, still)), Evidence: plan.Evidence}
		}
		plan.Notes = append(plan.Notes, absorbNotes...)
	}
	if !final.OK {
		return nil, &module.ValidationError{Msg: "the tree without every shadowing drop-in does not load: " + final.Err, Evidence: plan.Evidence}
	}
	effs[len(effs)-1] = final
	plan.Files = append(plan.Files, ownerFiles...)
	plan.Effective = ctrconf.Diff(base, effs[len(effs)-1])
	if a.Mode == "report" {
		for _, s := range movable {
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s shadows %s (mode report: not moved)", s.File, summary(s.Restored)))
		}
		plan.Skip = fmt.Sprintf("%d shadowing drop-in(s) found; mode report moves nothing", len(movable))
		return plan, nil
	}
	for _, s := range movable {
		f := tree.File(s.File)
		dest := filepath.Join(a.QuarantineDir, filepath.Base(s.File))
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
			Action: module.Move, From: s.File, Path: dest, Before: f.Content, After: f.Content,
			BeforeHash: module.Hash(f.Content), AfterHash: module.Hash(f.Content), Mode: 0o644,
			Reasons: []string{"shadows " + summary(s.Restored)},
		})
		note := []byte(fmt.Sprintf("# %s was moved here from %s by nodeconverge.\n# It shadowed, so containerd did not load: %s\n# Every value it sets is still in effect from another file (proven with %s config dump).\n# To undo: mv %s %s\n",
			filepath.Base(s.File), s.File, summary(s.Restored), tree.Bin, dest, s.File))
		plan.Files = append(plan.Files, module.FileChange{Action: module.Create, Path: dest + NoteSuffix, After: note, AfterHash: module.Hash(note), Mode: 0o644})
	}
	return plan, nil
}

// lost is one effective value a drop-in writes that removing it would
// change.
type lost struct {
	key   string
	segs  []string
	value any // as the drop-in writes it
	with  string
	after string
}

// lostKeys lists every effective value f writes that changes when f is
// removed (or, with absorb, is not carried by the candidate): the settings
// moving it would lose.
func lostKeys(f *ctrconf.File, with, without *ctrconf.Effective) ([]lost, error) {
	var m map[string]any
	if err := toml.Unmarshal(f.Content, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", f.Path, err)
	}
	delete(m, "version")
	delete(m, "imports")
	var out []lost
	walkLeaves(m, nil, func(segs []string, v any) {
		k := ctrconf.JoinKey(segs...)
		w, inWith := with.Get(k)
		wo, inWithout := without.Get(k)
		if inWith && (!inWithout || w != wo) {
			out = append(out, lost{key: k, segs: segs, value: v, with: w, after: orDefault(wo, inWithout)})
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

func lostText(ls []lost) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		w, a := l.with, l.after
		if ctrconf.Redact(l.key) {
			w, a = ctrconf.Redacted, ctrconf.Redacted
		}
		out[i] = fmt.Sprintf("%s = %s (would become %s)", l.key, w, a)
	}
	return out
}

func lostKeyNames(ls []lost) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.key
	}
	return out
}

func orLost(e *ctrconf.Effective, still []string) string {
	if !e.OK {
		return "does not load: " + e.Err
	}
	return "still loses:\n    " + strings.Join(still, "\n    ")
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
// plugin: on containerd 1.x the file that owns the plugin once path is gone.
func ownerBefore(t *ctrconf.Tree, path, plugin string) *ctrconf.File {
	var owner *ctrconf.File
	for i := range t.Files {
		f := &t.Files[i]
		if f.Path == path {
			break
		}
		for _, p := range f.Plugins {
			if p == plugin {
				owner = f
			}
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
