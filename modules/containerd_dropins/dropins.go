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

// Describe is the one-line summary for progress output.
func (Module) Describe(ma module.Args) string { return ma.(*Args).Config }

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
	variants = append(variants, all)
	effs, err := ctrconf.DumpMany(ctx, h, tree, variants)
	if err != nil {
		return nil, fmt.Errorf("dump without shadowing drop-ins: %w", err)
	}
	var refusals []string
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
		if len(lost) > 0 {
			refusals = append(refusals, fmt.Sprintf("%s shadows %s, but moving it would lose:\n    %s", s.File, summary(s.Restored), strings.Join(lost, "\n    ")))
		}
	}
	if len(refusals) > 0 {
		return nil, &module.ValidationError{Msg: "refusing to relocate; nothing was changed:\n  " + strings.Join(refusals, "\n  "), Evidence: plan.Evidence}
	}
	if final := effs[len(effs)-1]; !final.OK {
		return nil, &module.ValidationError{Msg: "the tree without every shadowing drop-in does not load: " + final.Err, Evidence: plan.Evidence}
	}
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

// lostKeys lists every effective value f writes that changes when f is
// removed: the settings moving it would lose.
func lostKeys(f *ctrconf.File, with, without *ctrconf.Effective) ([]string, error) {
	var m map[string]any
	if err := toml.Unmarshal(f.Content, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", f.Path, err)
	}
	delete(m, "version")
	delete(m, "imports")
	var lost []string
	for k := range ctrconf.Flatten(m) {
		w, inWith := with.Get(k)
		wo, inWithout := without.Get(k)
		if inWith && (!inWithout || w != wo) {
			if ctrconf.Redact(k) {
				w, wo = ctrconf.Redacted, ctrconf.Redacted
			}
			lost = append(lost, fmt.Sprintf("%s = %s (would become %s)", k, w, orDefault(wo, inWithout)))
		}
	}
	sort.Strings(lost)
	return lost, nil
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
		switch c.After {
		case `""`, "0", "false", "[]", "{}", "":
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
		case module.Create:
			ops = append(ops, transport.Op{Kind: transport.OpWrite, Path: f.Path, Content: f.After, Mode: f.Mode, Backup: true})
		}
	}
	if _, err := h.Apply(ctx, ops); err != nil {
		return nil, fmt.Errorf("relocate: %w", err)
	}
	return &module.Result{Changed: true, Files: p.Files}, nil
}
