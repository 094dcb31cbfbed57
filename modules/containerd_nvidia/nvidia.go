// Package containerdnvidia is the `containerd_nvidia` module: it makes
// exactly one set of the named nvidia runtime handlers effective (state
// present) or none (state absent), and proves with the node's own containerd
// that the result is what the daemon will load.
//
// With an explicit path it edits that one file. With path auto it decides
// where the runtimes take effect from the ownership it measures (containerd
// 1.x: the file that owns the CRI plugin; 2.x: a drop-in) and strips the
// named runtimes from every other loaded file in the same plan. Files are
// rebuilt, never appended to: the named runtime tables are stripped line by
// line (so duplicated tables that no TOML parser accepts are repaired too,
// and comments, line endings, owner and mode stay) and one set is rendered.
// Whether to write is decided by the effective configuration, not by the
// text, so a file the GPU Operator rewrites in its own formatting is left
// alone; options are read as the node's containerd version decodes them.
package containerdnvidia

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
	"nodeconverge/modules/containerd/nvidiatoml"
	"nodeconverge/modules/containerd/runtimeopts"
)

func init() {
	module.Register(module.Registration{Name: "containerd_nvidia", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// Runtime is one requested runtime handler. In a playbook it is either a
// name (nvidia, nvidia-cdi, nvidia-legacy get the GPU Operator's binaries
// under toolkit_dir) or a mapping {name, binary_name}.
type Runtime struct {
	Name       string `yaml:"name"`
	BinaryName string `yaml:"binary_name"`
}

// UnmarshalYAML accepts a plain name as well as a mapping.
func (r *Runtime) UnmarshalYAML(unmarshal func(any) error) error {
	var name string
	if err := unmarshal(&name); err == nil {
		r.Name = name
		return nil
	}
	type plain Runtime
	var p plain
	if err := unmarshal(&p); err != nil {
		return fmt.Errorf("a runtime is a name or {name, binary_name}: %w", err)
	}
	*r = Runtime(p)
	return nil
}

// Auto is the Path that lets the module choose the file (issue 10, defect 5):
// the runtimes go where the node's containerd takes them from, and the
// managed runtimes are stripped from every other file it loads, so exactly
// one set is effective.
const Auto = "auto"

// Args are the module's arguments; the defaults follow the GPU Operator.
//
// State present makes exactly one set of the named runtimes effective;
// absent removes them; repair only strips the named runtimes from loaded
// files that containerd cannot parse (tables pasted twice), so that the tree
// loads and later tasks can measure it. Only the named runtimes are touched:
// others, even ones whose names start with "nvidia" (k3s's
// nvidia-experimental, microk8s's nvidia-container-runtime), are left as
// they are and reported in the plan's notes.
type Args struct {
	Path         string    `yaml:"path"`
	Config       string    `yaml:"config"`
	ToolkitDir   string    `yaml:"toolkit_dir"`
	Runtimes     []Runtime `yaml:"runtimes"`
	SetAsDefault bool      `yaml:"set_as_default"`
	State        string    `yaml:"state"`
	Containerd   string    `yaml:"containerd"`
	// ReplaceForeign lets the module replace a runtime of a managed name
	// that is another runtime (gVisor's runsc named nvidia); without it
	// such a node is refused, naming what the runtime is (foreign.go).
	ReplaceForeign bool `yaml:"replace_foreign"`
}

// Validate fills derived defaults and checks what a type cannot.
func (a *Args) Validate() error {
	switch a.State {
	case "present", "absent", "repair":
	default:
		return fmt.Errorf("state must be present, absent or repair, not %q", a.State)
	}
	if a.State == "repair" && a.Path != Auto {
		return fmt.Errorf("state repair looks at every loaded file: path must be %q", Auto)
	}
	if a.SetAsDefault && a.State != "present" {
		return fmt.Errorf("set_as_default needs state present")
	}
	paths := []string{a.Config, a.ToolkitDir}
	if a.Path != Auto {
		paths = append(paths, a.Path)
	}
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("path %q must be absolute (or %q for path)", p, Auto)
		}
	}
	if len(a.Runtimes) == 0 {
		a.Runtimes = []Runtime{{Name: "nvidia"}, {Name: "nvidia-cdi"}, {Name: "nvidia-legacy"}}
	}
	seen := map[string]bool{}
	for i := range a.Runtimes {
		r := &a.Runtimes[i]
		if r.Name == "" {
			return fmt.Errorf("runtimes[%d]: name is empty", i)
		}
		if seen[r.Name] {
			return fmt.Errorf("runtimes: %q listed twice", r.Name)
		}
		seen[r.Name] = true
		if r.BinaryName == "" {
			suffix, ok := map[string]string{"nvidia": "", "nvidia-cdi": ".cdi", "nvidia-legacy": ".legacy"}[r.Name]
			if !ok {
				return fmt.Errorf("runtimes: %q needs a binary_name (only nvidia, nvidia-cdi and nvidia-legacy have defaults)", r.Name)
			}
			r.BinaryName = filepath.Join(a.ToolkitDir, "nvidia-container-runtime"+suffix)
		}
	}
	return nil
}

// Declares implements ctrconf.Owner: the tables of the managed runtimes
// (and, with set_as_default, the default runtime) are this task's within
// its play, so another task's candidate that changes them is not refused
// for it. A repair declares nothing: it only makes files parse.
func (a *Args) Declares(key string, major int) (string, bool) {
	if a.State == "repair" {
		return "", false
	}
	plugin := ctrconf.CRIPlugin
	if major >= 2 {
		plugin = ctrconf.CRIRuntimePlugin
	}
	segs := ctrconf.SplitKey(key)
	if len(segs) == 4 && segs[0] == "plugins" && segs[1] == plugin && segs[2] == "containerd" && segs[3] == "default_runtime_name" && a.SetAsDefault {
		return ctrconf.Canonical(a.Runtimes[0].Name), true
	}
	if len(segs) < 5 || segs[0] != "plugins" || segs[1] != plugin || segs[2] != "containerd" || segs[3] != "runtimes" {
		return "", false
	}
	for _, r := range a.Runtimes {
		if segs[4] == r.Name {
			return "", true
		}
	}
	return "", false
}

// Module implements module.Module.
type Module struct{}

// NewArgs returns the GPU Operator's defaults.
func (Module) NewArgs() module.Args {
	return &Args{
		Path:       "/etc/containerd/conf.d/99-nvidia.toml",
		Config:     "/etc/containerd/config.toml",
		ToolkitDir: "/usr/local/nvidia/toolkit",
		State:      "present",
		Containerd: ctrconf.DefaultBin,
	}
}

// Prefetch is what Check reads before its first round trip of its own:
// the containerd tree and, for state present, the runtime binaries' check.
func (Module) Prefetch(ma module.Args) transport.Query {
	a := ma.(*Args)
	q := ctrconf.PrefetchQuery(a.Config, a.Containerd)
	if a.State == "present" {
		q.Cmds = append(q.Cmds, a.binCheck())
	}
	return q
}

// binCheck lists the requested runtime binaries that are missing or not
// executable on the node.
func (a *Args) binCheck() transport.Cmd {
	var script strings.Builder
	for _, r := range a.Runtimes {
		fmt.Fprintf(&script, "test -x %s || echo %s\n", transport.ShellQuote(r.BinaryName), transport.ShellQuote(r.BinaryName))
	}
	return transport.Cmd{Script: script.String()}
}

// DumpRuntimesPrefix is where a containerd binary prints runtimes in its
// `config dump`: 2.x migrates every file to the cri.v1 layout before
// merging, so the key depends on the binary, not on the file's version.
func DumpRuntimesPrefix(binVersion string) string {
	if BinMajor(binVersion) >= 2 {
		return `plugins."io.containerd.cri.v1.runtime".containerd.runtimes`
	}
	return `plugins."io.containerd.grpc.v1.cri".containerd.runtimes`
}

// BinMajor reads the major version from `containerd --version` output
// ("containerd github.com/containerd/containerd/v2 v2.4.2 ..."); 1 when it
// cannot tell, the conservative answer for the merge rules.
func BinMajor(binVersion string) int {
	f := strings.Fields(binVersion)
	if len(f) < 3 {
		return 1
	}
	v := strings.TrimPrefix(f[2], "v")
	if len(v) > 0 && v[0] >= '2' && v[0] <= '9' {
		return int(v[0] - '0')
	}
	return 1
}

// edit is one file the plan may rewrite.
type edit struct {
	path string
	live *transport.FileInfo
	// cands are the candidate contents, most preferred first (one per
	// layout tried for the target, one for a stripped file).
	cands [][]byte
	// layouts are the config versions of cands for the target.
	layouts []int
}

// Check builds the candidate files and measures them with the node's own
// containerd: it decides where the runtimes go (path auto), which layout the
// daemon honours (on 2.x both layouts are staged and the first that makes
// exactly the requested runtimes effective wins), and reads every option as
// that daemon version decodes it.
func (Module) Check(ctx context.Context, h transport.Reader, ma module.Args) (*module.Plan, error) {
	a := ma.(*Args)
	tree, err := ctrconf.Gather(ctx, h, a.Config, a.Containerd)
	if err != nil {
		return nil, fmt.Errorf("read containerd config: %w", err)
	}
	var binCheck []transport.Cmd
	if a.State == "present" {
		binCheck = []transport.Cmd{a.binCheck()}
	}
	binsMissing := func(r *transport.CmdResult) error {
		if missing := strings.Fields(string(r.Stdout)); len(missing) > 0 {
			return fmt.Errorf("runtime binaries missing or not executable on %s: %s", h.Host(), strings.Join(missing, ", "))
		}
		return nil
	}
	names := make([]string, len(a.Runtimes))
	for i, r := range a.Runtimes {
		names[i] = r.Name
	}
	managed := nvidiatoml.IsManaged(names)

	// The live dump: a staged unit of its own, so every containerd task
	// of a play, and the re-check after apply on the tree a plan proved,
	// share one run of containerd per tree content.
	plan := &module.Plan{}
	var base *ctrconf.Effective
	if u, ok := redefined(tree); ok {
		// A table header written twice (the incident's fix pasted
		// twice) is refused by every TOML decoder containerd has
		// shipped: a dump of this tree can only fail, so it is not
		// run. Any other parse failure is measured: decoders differ
		// at the edges (redefined).
		base = &ctrconf.Effective{Err: fmt.Sprintf("containerd cannot load %s: %s", u.Path, u.Why)}
		plan.Evidence = append(plan.Evidence, module.Evidence{What: "live tree", Command: "read the table headers of " + u.Path + " (a header written twice: no containerd loads it, so no dump is run)",
			Output: base.Err, Required: true})
	} else {
		if base, err = ctrconf.Dump(ctx, h, tree, nil); err != nil {
			return nil, fmt.Errorf("dump live config: %w", err)
		}
		plan.Evidence = append(plan.Evidence, ctrconf.DumpEvidence("live tree", tree, base))
	}
	major := BinMajor(tree.BinVersion)
	prefix := DumpRuntimesPrefix(tree.BinVersion)
	if c := ctrconf.RegistryConflict(base); base.OK && c != "" && ctrconf.PlayMigratesMirrors(ctx) != "" {
		// The play's own migration moves the mirrors into hosts.toml
		// files (a later task): the conflict is that task's to repair.
		plan.Notes = append(plan.Notes, fmt.Sprintf("the live config keeps the CRI plugin from loading (%s); task %q of this play moves the mirrors into hosts.toml files", c, ctrconf.PlayMigratesMirrors(ctx)))
	} else if base.OK && c != "" {
		// config dump accepts it, the CRI plugin does not load: the node
		// is down for Kubernetes now, and any restart this play owes
		// would fail its gates. Nothing is written on such a host.
		return nil, &module.ValidationError{Msg: fmt.Sprintf("the node's containerd config already keeps its CRI plugin from loading, so nothing is changed here: %s", c), Evidence: plan.Evidence}
	}

	if a.State != "repair" && !a.ReplaceForeign {
		if fs := foreignManaged(tree, base, major, names); len(fs) > 0 {
			return nil, &module.ValidationError{Msg: fmt.Sprintf("refusing to %s: a runtime of a name this task manages is not NVIDIA's runc-based runtime, and rewriting it would run its pods under runc on the host kernel without saying so; nothing was changed: %s. Give NVIDIA's runtimes other names (runtimes:), or set replace_foreign: true to replace it",
				map[string]string{"present": "rebuild the runtimes", "absent": "remove the runtimes"}[a.State], strings.Join(fs, "; ")), Evidence: plan.Evidence}
		}
	}

	target := ""
	switch {
	case a.Path != Auto:
		target = a.Path
	case a.State == "present":
		var why string
		target, why = choosePath(tree, major, managed)
		plan.Notes = append(plan.Notes, why)
	}

	var target0 *edit
	var edits []*edit
	if target != "" {
		e := &edit{path: target}
		if tf := tree.File(target); tf != nil {
			e.live = &transport.FileInfo{Path: target, Exists: !tf.Missing, Content: tf.Content}
		} else {
			// No import loads the file: read it, so it is never clobbered.
			snap, err := h.Query(ctx, transport.Query{Files: []string{target}})
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", target, err)
			}
			e.live = snap.File(target)
		}
		tmpl := base
		if !base.OK && a.State == "present" {
			// The live tree does not load (a table pasted twice), so
			// runc's options cannot be read from it; they are read from
			// the tree as a repair would leave it, or the rebuilt
			// runtimes would lack them and the next check, on a tree
			// that loads, would plan them again (issue 28 #3).
			if tmpl, err = repairedDump(ctx, h, tree, managed); err != nil {
				return nil, err
			}
		}
		if err := a.targetCandidates(e, tree, tmpl, major, prefix); err != nil {
			return nil, err
		}
		target0 = e
		edits = append(edits, e)
	}
	if a.Path == Auto {
		// Every other loaded file loses its copies of the managed runtimes,
		// so exactly one set exists; repair touches only files that do not
		// parse.
		for _, f := range tree.Files {
			if f.Missing || f.Path == target || (a.State == "repair" && f.Parses) {
				continue
			}
			out, n := nvidiatoml.Strip(f.Content, managed, nvidiatoml.StripOptions{DropDefaultRuntimeName: a.State == "absent"})
			if n == 0 {
				continue
			}
			edits = append(edits, &edit{path: f.Path, live: &transport.FileInfo{Path: f.Path, Exists: true, Content: f.Content}, cands: [][]byte{out}})
		}
	}

	// A target candidate that differs from the file only in zero values
	// inside the managed runtime tables (the GPU Operator writes
	// runtime_engine = "" and friends) loads exactly as the file does: the
	// live dump above already proves what it does; no second dump, no write.
	same := func(e *edit, cand []byte) bool {
		return bytes.Equal(cand, e.live.Content) && e.live.Exists ||
			e.live.Exists && sameButZeros(e.live.Content, cand, managed)
	}
	needDump := len(edits) > 1 || (len(edits) == 1 && (edits[0] != target0 || !same(target0, target0.cands[0])))
	chosen := 0 // index into the variants
	after := base
	var diff []module.EffectiveChange
	if !needDump {
		if len(binCheck) > 0 {
			snap, err := h.Query(ctx, transport.Query{Cmds: binCheck})
			if err != nil {
				return nil, fmt.Errorf("check runtime binaries: %w", err)
			}
			if err := binsMissing(snap.Cmds[0]); err != nil {
				return nil, err
			}
		}
		if err := a.checkEffective(ctx, tree, target, names, prefix, major, base, base, nil); err != nil {
			return nil, &module.ValidationError{Msg: err.Error(), Evidence: plan.Evidence}
		}
	} else {
		nv := 1
		if target0 != nil {
			nv = len(target0.cands)
		}
		variants := make([]ctrconf.Overrides, nv)
		for i := range variants {
			over := ctrconf.Overrides{}
			for _, e := range edits {
				c := e.cands[0]
				if e == target0 {
					c = e.cands[i]
				}
				over[e.path] = c
			}
			variants[i] = over
		}
		effs, extra, err := ctrconf.DumpManyWith(ctx, h, tree, variants, binCheck)
		if err != nil {
			return nil, fmt.Errorf("dump candidate: %w", err)
		}
		if len(binCheck) > 0 {
			if err := binsMissing(extra[0]); err != nil {
				return nil, err
			}
		}
		// Every layout that fails says why: when none works, the operator
		// sees what each one would have done, not only the first.
		var errs []string
		chosen = -1
		for i, eff := range effs {
			what := "candidate tree"
			if target0 != nil {
				what += fmt.Sprintf(" with %s rebuilt in the version %d layout", target, target0.layouts[i])
			}
			plan.Evidence = append(plan.Evidence, ctrconf.DumpEvidence(what, tree, eff))
			var err error
			if !eff.OK {
				err = fmt.Errorf("the candidate tree does not load with %s; the live files are unchanged:\n%s", tree.Bin, eff.Err)
			} else {
				d := ctrconf.Diff(base, eff)
				if err = a.checkEffective(ctx, tree, target, names, prefix, major, base, eff, d); err == nil {
					chosen, after, diff = i, eff, d
					break
				}
			}
			if len(effs) > 1 && target0 != nil {
				err = fmt.Errorf("in the version %d layout: %w", target0.layouts[i], err)
			}
			errs = append(errs, err.Error())
		}
		if chosen < 0 {
			return nil, &module.ValidationError{Msg: strings.Join(errs, "\n"), Evidence: plan.Evidence}
		}
		if c := ctrconf.RegistryConflict(after); c != "" && ctrconf.PlayMigratesMirrors(ctx) == "" {
			// config dump accepts it; the CRI plugin would not load after
			// the restart this write asks for. Refused before any write,
			// unless a task of the play moves the mirrors out.
			return nil, &module.ValidationError{Msg: fmt.Sprintf("refusing to write; the live files are unchanged: %s (this change would bring them together)", c), Evidence: plan.Evidence}
		}
		if target0 != nil && chosen > 0 {
			plan.Notes = append(plan.Notes, fmt.Sprintf("measured: with %s in the version %d layout, %s does not make the runtimes effective; the version %d layout does",
				target, target0.layouts[0], tree.Bin, target0.layouts[chosen]))
		}
	}
	plan.Notes = append(plan.Notes, foreignNotes(after, major, managed)...)

	for _, e := range edits {
		cand := e.cands[0]
		if e == target0 {
			cand = e.cands[chosen]
			if !writeNeeded(a, e.live, cand, base, diff) {
				continue
			}
		} else if bytes.Equal(cand, e.live.Content) {
			continue
		}
		fc := module.FileChange{Action: module.Update, Path: e.path, Before: e.live.Content, After: cand,
			BeforeHash: module.Hash(e.live.Content), AfterHash: module.Hash(cand)}
		if !e.live.Exists {
			fc.Action, fc.Before, fc.BeforeHash, fc.Mode = module.Create, nil, "", 0o644
		}
		plan.Files = append(plan.Files, fc)
	}
	if len(plan.Files) == 0 {
		return plan, nil
	}
	if r := ctrconf.PlatformRefusal(tree, plan.Files); r != "" {
		return nil, &module.ValidationError{Msg: r, Evidence: plan.Evidence}
	}
	if base.OK {
		plan.Effective = ctrconf.Attribute(tree, diff)
	} else {
		plan.Notes = append(plan.Notes, "the live config does not load ("+base.ErrLine()+"); the candidate tree loads")
		plan.Effective = []module.EffectiveChange{{Key: "(whole config)", Before: "does not load: " + base.ErrLine(), After: "loads"}}
	}
	return plan, nil
}

// redefined returns the first file of the tree that does not parse and
// writes one table header twice, byte for byte (nvidiatoml.RepeatedTable).
// Our decoder's word alone is not enough: it refuses redefinitions that
// containerd 1.x's go-toml v1 loads (`a.b = 1` then `[a]`, or [x."k"] then
// [x.'k']), and a tree the node loads must be measured, not declared dead.
func redefined(t *ctrconf.Tree) (ctrconf.Undecidable, bool) {
	for _, u := range t.Undecidable() {
		if !u.Parse {
			continue
		}
		f := t.File(u.Path)
		if f == nil {
			continue
		}
		if r, ok := nvidiatoml.RepeatedTable(f.Content); ok {
			u.Why = fmt.Sprintf("table %s is declared twice (lines %d and %d); %s", r.Header, r.First, r.Again, u.Why)
			return u, true
		}
	}
	return ctrconf.Undecidable{}, false
}

// targetCandidates rebuilds the target file once per layout to try, the
// preferred first. containerd 1.x reads only the version 2 layout. 2.x
// migrates each file on its own in 2.4 but not in every 2.x release (a
// version 2 drop-in under a version 3 main config was measured ineffective
// on 2.1.5), so the layout of the main config comes first and the file's
// own layout second; both are staged and the dumps decide.
func (a *Args) targetCandidates(e *edit, tree *ctrconf.Tree, base *ctrconf.Effective, major int, prefix string) error {
	fileVer := nvidiatoml.DetectVersion(e.live.Content)
	// v3Named: a file older than version 3 that already configures the
	// runtimes under 2.x's plugin name; it keeps its version key.
	f := tree.File(e.path)
	v3Named := f != nil && fileVer < 3 && slices.Contains(f.Plugins, ctrconf.CRIRuntimePlugin)
	var layouts []int
	switch {
	case fileVer <= 1 && nvidiatoml.UsesV1CRIName(e.live.Content):
		// An unversioned file that names the CRI plugin `cri` (containerd
		// 1.0-1.2's layout, nvidia-container-toolkit's v1 test config):
		// every containerd migrates `cri` to the long id, so runtimes
		// rendered under the long id would collide with the file's own
		// table. They are rendered under `cri`.
		layouts = []int{1}
	case a.State != "present":
		// Nothing is rendered: one candidate, the file's own layout.
		layouts = []int{max(2, min(fileVer, 3))}
	case major < 2:
		layouts = []int{2}
	default:
		pref := tree.Version
		if e.path == tree.Main && fileVer != 0 {
			pref = fileVer
		}
		switch {
		case pref >= 3 || pref == 0:
			pref = 3
		case pref < 2:
			pref = 2
		}
		layouts = []int{pref}
		if fileVer >= 2 && min(fileVer, 3) != pref {
			layouts = append(layouts, min(fileVer, 3))
		}
		if v3Named && !slices.Contains(layouts, 3) {
			// AKS writes `version = 2` with the 2.x plugin names: 2.x's
			// migration then skips the runtimes of a version 2 CRI table
			// (the file's own runtimes table already exists), so only
			// the names the file already uses take effect.
			layouts = append([]int{3}, layouts...)
		}
	}
	rtype, opts := runcTemplate(base, major)
	rts := make([]nvidiatoml.Runtime, len(a.Runtimes))
	for i, r := range a.Runtimes {
		rts[i] = nvidiatoml.Runtime{Name: r.Name, RuntimeType: rtype, BinaryName: r.BinaryName, Options: opts}
	}
	if a.State == "present" && major < 2 && !writesRuntimes(tree, e.path) && !slices.ContainsFunc(a.Runtimes, func(r Runtime) bool { return r.Name == "runc" }) {
		// containerd 1.x: a runtimes table in a file that had none (no file
		// mentioned the CRI plugin, or the one that owns it configures no
		// runtime: a version 1 file with only default_runtime) replaces
		// the built-in one, and the built-in runc (the default runtime)
		// would be gone. Render it as it is effective, so only the
		// requested runtimes change.
		if runc, ok := runtimesOf(base, major)["runc"]; ok {
			// Every option as effective, zeros included: the built-in
			// runc carries a full options table, and an absent one would
			// show as a change.
			raw, _ := runc["options"].(map[string]any)
			all := map[string]any{}
			for k, v := range runtimeopts.Canonical(major, raw, runtimeopts.RuncFields) {
				if _, nested := v.(map[string]any); !nested {
					all[k] = v
				}
			}
			rts = append(rts, nvidiatoml.Runtime{Name: "runc", RuntimeType: rtype, Options: all})
		}
	}
	for _, l := range layouts {
		if !a.ReplaceForeign {
			// The operator's own fields of each runtime's table stay.
			for i := range rts {
				rts[i].Fields = ownFields(tree, rts[i].Name, l)
			}
		}
		cand, err := nvidiatoml.Rebuild(e.live.Content, nvidiatoml.Layout{Version: l}, rts, a.SetAsDefault, a.State == "present")
		if err != nil {
			return fmt.Errorf("rebuild %s: %w", e.path, err)
		}
		if a.State == "present" && fileVer != 0 && l != 1 && min(fileVer, 3) != l && !(v3Named && l == 3) {
			cand = nvidiatoml.SetVersion(cand, l)
			if l == 3 && fileVer == 2 {
				cand = carryToV3(cand)
			}
		}
		e.cands = append(e.cands, cand)
		e.layouts = append(e.layouts, l)
	}
	return nil
}

// choosePath decides where the runtimes take effect, from what the tree
// measures (issue 10, defect 5). containerd 1.x takes the whole CRI table
// from the last loaded file that mentions the plugin, so the runtimes go into
// that file; a new drop-in would replace that file's CRI settings. 2.x
// merges per key, so a drop-in works: the last loaded drop-in that already
// holds the managed runtimes, else conf.d/99-nvidia.toml beside the main
// config when an import loads it, else the main config itself.
func choosePath(tree *ctrconf.Tree, major int, managed func(string) bool) (string, string) {
	dropin := filepath.Join(filepath.Dir(tree.Main), "conf.d", "99-nvidia.toml")
	loadsDropin := tree.File(dropin) != nil
	for _, pat := range tree.Imports {
		if ok, err := filepath.Match(pat, dropin); err == nil && ok {
			loadsDropin = true
		}
	}
	if major < 2 {
		owner := ""
		for _, f := range tree.Files {
			if !f.Missing && slices.Contains(f.Plugins, ctrconf.CRIPlugin) {
				owner = f.Path
			}
		}
		if owner != "" {
			return owner, fmt.Sprintf("runtimes go into %s: it is the last file containerd 1.x loads that mentions %s, and that file's table is the whole plugin's configuration", owner, ctrconf.CRIPlugin)
		}
		if loadsDropin {
			return dropin, fmt.Sprintf("runtimes go into %s: no loaded file mentions %s", dropin, ctrconf.CRIPlugin)
		}
		return tree.Main, fmt.Sprintf("runtimes go into %s: no loaded file mentions %s and no import loads %s", tree.Main, ctrconf.CRIPlugin, dropin)
	}
	for i := len(tree.Files) - 1; i >= 1; i-- {
		f := tree.Files[i]
		if f.Missing {
			continue
		}
		if _, n := nvidiatoml.Strip(f.Content, managed, nvidiatoml.StripOptions{}); n > 0 {
			return f.Path, fmt.Sprintf("runtimes go into %s: containerd 2.x merges files per key and this drop-in already defines them", f.Path)
		}
	}
	if loadsDropin {
		return dropin, fmt.Sprintf("runtimes go into the drop-in %s: containerd 2.x merges files per key", dropin)
	}
	return tree.Main, fmt.Sprintf("runtimes go into %s: no import of it loads %s", tree.Main, dropin)
}

// writesRuntimes reports whether the file at path configures any CRI
// runtime (containerd 1.x names, a version 1 file's `cri` migrated).
func writesRuntimes(tree *ctrconf.Tree, path string) bool {
	f := tree.File(path)
	if f == nil {
		return false
	}
	prefix := ctrconf.JoinKey("plugins", ctrconf.CRIPlugin, "containerd", "runtimes")
	for _, k := range f.Writes() {
		if k == prefix || strings.HasPrefix(k, prefix+".") {
			return true
		}
	}
	return false
}

// runtimesOf returns the CRI runtimes of an effective config, by name.
func runtimesOf(e *ctrconf.Effective, major int) map[string]map[string]any {
	plugin := ctrconf.CRIPlugin
	if major >= 2 {
		plugin = ctrconf.CRIRuntimePlugin
	}
	var node any = e.Values
	for _, k := range []string{"plugins", plugin, "containerd", "runtimes"} {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[k]
	}
	m, _ := node.(map[string]any)
	out := map[string]map[string]any{}
	for k, v := range m {
		if rt, ok := v.(map[string]any); ok {
			out[k] = rt
		}
	}
	return out
}

// foreignNotes names the effective runtimes that look like nvidia's but
// are not managed by this task: they are left as they are.
func foreignNotes(e *ctrconf.Effective, major int, managed func(string) bool) []string {
	var other []string
	for n := range runtimesOf(e, major) {
		if !managed(n) && strings.Contains(strings.ToLower(n), "nvidia") {
			other = append(other, n)
		}
	}
	if len(other) == 0 {
		return nil
	}
	sort.Strings(other)
	return []string{fmt.Sprintf("runtimes %s are not managed by this task (not in its runtimes); left as they are", strings.Join(other, ", "))}
}

// sameButZeros reports whether two TOML files parse to the same values once
// zero values are dropped inside the managed runtime tables.
func sameButZeros(a, b []byte, managed func(string) bool) bool {
	var ma, mb map[string]any
	if toml.Unmarshal(a, &ma) != nil || toml.Unmarshal(b, &mb) != nil {
		return false
	}
	dropRuntimeZeros(ma, nil, managed)
	dropRuntimeZeros(mb, nil, managed)
	return reflect.DeepEqual(ma, mb)
}

// dropRuntimeZeros removes zero-valued leaves (and tables left empty) under
// any plugins.<id>.containerd.runtimes.<managed name>.
func dropRuntimeZeros(m map[string]any, path []string, managed func(string) bool) {
	n := len(path)
	inRuntime := n >= 5 && path[0] == "plugins" && path[2] == "containerd" && path[3] == "runtimes" && managed(path[4])
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			dropRuntimeZeros(sub, append(append([]string(nil), path...), k), managed)
			if inRuntime || (n >= 4 && path[0] == "plugins" && path[3] == "runtimes" && managed(k)) {
				if len(sub) == 0 {
					delete(m, k)
				}
			}
			continue
		}
		if inRuntime && isZero(v) {
			delete(m, k)
		}
	}
}

// writeNeeded decides by meaning. With state absent the file must not
// mention the managed runtimes at all (a shadowed block is a trap for the
// next person). With state present a rewrite is owed when the live tree
// does not load, the file does not parse (duplicated tables), or the daemon
// would load something different; formatting alone never triggers a write.
func writeNeeded(a *Args, live *transport.FileInfo, cand []byte, base *ctrconf.Effective, diff []module.EffectiveChange) bool {
	if bytes.Equal(cand, live.Content) && live.Exists {
		return false
	}
	if a.State == "absent" {
		return live.Exists
	}
	if !live.Exists || !base.OK || len(diff) > 0 {
		return true
	}
	var m map[string]any
	return toml.Unmarshal(live.Content, &m) != nil
}

// checkEffective proves the candidate holds the requested runtimes, each
// with BinaryName as this daemon version decodes the options, and changes
// nothing else in the effective config.
func (a *Args) checkEffective(ctx context.Context, tree *ctrconf.Tree, target string, names []string, prefix string, major int, base, after *ctrconf.Effective, diff []module.EffectiveChange) error {
	rts := runtimesOf(after, major)
	switch a.State {
	case "present":
		var bad []string
		for _, r := range a.Runtimes {
			rt, ok := rts[r.Name]
			if !ok {
				bad = append(bad, fmt.Sprintf("runtime %s is not in the effective config", r.Name))
				continue
			}
			opts, _ := rt["options"].(map[string]any)
			v, key, ok := runtimeopts.Decode(major, opts, "BinaryName")
			if !ok || v != r.BinaryName {
				msg := fmt.Sprintf("runtime %s: containerd %d.x decodes BinaryName = %v from option key %q, want %s", r.Name, major, v, key, r.BinaryName)
				if !ok {
					msg = fmt.Sprintf("runtime %s: no option containerd %d.x decodes as BinaryName, want %s", r.Name, major, r.BinaryName)
				}
				if c := runtimeopts.Collisions(opts); len(c) > 0 {
					msg += fmt.Sprintf(" (option keys that differ only in case: %v)", c)
				}
				bad = append(bad, msg)
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("after the change the node's containerd would still not load the requested runtimes:\n  %s\n%s",
				strings.Join(bad, "\n  "), diagnose(tree, target, after, major, names))
		}
	case "absent":
		var left []string
		for _, n := range names {
			if _, ok := rts[n]; ok {
				left = append(left, n)
			}
		}
		if len(left) > 0 && a.Path == Auto {
			return fmt.Errorf("after stripping every loaded file the runtimes %s are still effective", strings.Join(left, ", "))
		}
	}
	if !base.OK {
		// The live tree does not load at all: "loads and holds the
		// runtimes" is the bar.
		return nil
	}
	var other []string
	for _, c := range diff {
		if intended(a, names, prefix, c.Key) || ctrconf.PlayDeclares(ctx, c.Key, c.After, major) != "" {
			// Ours, or a value another task of the play declares,
			// brought to what it declares.
			continue
		}
		other = append(other, fmt.Sprintf("%s: %q -> %q", c.Key, c.Before, c.After))
	}
	if len(other) > 0 {
		sort.Strings(other)
		return fmt.Errorf("refusing: the change would also alter effective settings it does not own:\n  %s", strings.Join(other, "\n  "))
	}
	return nil
}

// diagnose names the measured cause of runtimes that are not effective in a
// candidate tree: the file is not loaded, a later file owns the CRI plugin
// (1.x), or a later file sets the runtime's options (2.x). It never guesses
// a cause the tree does not show.
func diagnose(tree *ctrconf.Tree, target string, after *ctrconf.Effective, major int, names []string) string {
	if target == "" {
		return "the runtimes are defined by no file this task edits"
	}
	idx := slices.Index(after.Files, target)
	if idx < 0 {
		return fmt.Sprintf("cause: containerd does not load %s: no import of %s (or of the files it imports) names it; imports: %s. Use path: auto, or a path an import loads",
			target, tree.Main, strings.Join(tree.Imports, ", "))
	}
	var later []string
	for _, p := range after.Files[idx+1:] {
		f := tree.File(p)
		if f == nil {
			continue
		}
		if major < 2 {
			if slices.Contains(f.Plugins, ctrconf.CRIPlugin) {
				later = append(later, fmt.Sprintf("%s is loaded after %s and mentions %s: containerd 1.x takes that plugin's whole table from the last file that mentions it", p, target, ctrconf.CRIPlugin))
			}
			continue
		}
		for _, n := range names {
			if _, k := nvidiatoml.Strip(f.Content, nvidiatoml.IsManaged([]string{n}), nvidiatoml.StripOptions{}); k > 0 {
				later = append(later, fmt.Sprintf("%s is loaded after %s and sets runtime %s: containerd 2.x takes each key from the last file that sets it", p, target, n))
			}
		}
	}
	if len(later) > 0 {
		return "cause: " + strings.Join(later, "; ") + ". Run containerd_dropins first, or use path: auto"
	}
	return fmt.Sprintf("cause: %s is loaded (file %d of %d) and no later file touches the runtimes; containerd %d.x does not take the runtimes from it in this layout (see docs/containerd-versions.md)",
		target, idx+1, len(after.Files), major)
}

func intended(a *Args, names []string, prefix, key string) bool {
	if strings.HasSuffix(key, ".default_runtime_name") {
		return a.SetAsDefault || a.State == "absent"
	}
	if key == "imports" {
		// The dump's imports lists the files loaded: a new drop-in that
		// an existing glob picks up shows there, and is the point.
		return true
	}
	rest, ok := strings.CutPrefix(key, prefix+".")
	if !ok {
		return false
	}
	for _, n := range names {
		if rest == ctrconf.JoinKey(n) || strings.HasPrefix(rest, ctrconf.JoinKey(n)+".") {
			return true
		}
	}
	return false
}

// runcTemplate takes runtime_type and the options of the effective runc
// entry, as nvidia-ctk does, so the nvidia runtimes inherit SystemdCgroup.
// The options are read as the daemon decodes them and spelled once each
// (runtimeopts.Canonical): runc's `binaryName` must not travel next to the
// nvidia runtimes' own BinaryName (issue 10, defect 2).
// repairedDump is the dump of tree with the managed runtimes stripped from
// every file that does not parse: the tree state repair would leave. It is
// the live tree's failed dump again when that tree does not load either.
func repairedDump(ctx context.Context, h transport.Reader, tree *ctrconf.Tree, managed func(string) bool) (*ctrconf.Effective, error) {
	over := ctrconf.Overrides{}
	for _, f := range tree.Files {
		if !f.Missing && !f.Parses {
			out, _ := nvidiatoml.Strip(f.Content, managed, nvidiatoml.StripOptions{})
			over[f.Path] = out
		}
	}
	e, err := ctrconf.Dump(ctx, h, tree, over)
	if err != nil {
		return nil, fmt.Errorf("dump the repaired tree: %w", err)
	}
	return e, nil
}

func runcTemplate(base *ctrconf.Effective, major int) (string, map[string]any) {
	rtype := "io.containerd.runc.v2"
	opts := map[string]any{}
	if !base.OK {
		return rtype, opts
	}
	runc, ok := runtimesOf(base, major)["runc"]
	if !ok {
		return rtype, opts
	}
	if t, ok := runc["runtime_type"].(string); ok && t != "" {
		rtype = t
	}
	raw, _ := runc["options"].(map[string]any)
	for k, v := range runtimeopts.Canonical(major, raw, runtimeopts.RuncFields) {
		if _, nested := v.(map[string]any); nested || strings.EqualFold(k, "BinaryName") || isZero(v) {
			continue
		}
		opts[k] = v
	}
	return rtype, opts
}

// isZero drops options that are only defaults, so the rendered tables say
// what matters (SystemdCgroup = true) and not a page of empty strings.
func isZero(v any) bool {
	if v == nil {
		return true
	}
	return reflect.ValueOf(v).IsZero()
}

// Apply writes the planned files atomically, the old ones kept in the run's
// backup; owner and mode of an existing file are kept.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	return module.ApplyFiles(ctx, h, p)
}
