// Package containerdnvidia is the `containerd_nvidia` module: it makes one
// file hold exactly one set of nvidia runtime handlers (state present) or
// none (state absent), and proves with the node's own containerd that the
// result is what the daemon will load.
//
// The file is rebuilt, never appended to: every nvidia runtime table is
// stripped line by line (so duplicated tables that no TOML parser accepts
// are repaired too) and one set is rendered. Whether to write is decided by
// the effective configuration, not by the text, so a file the GPU Operator
// rewrites in its own formatting is left alone.
package containerdnvidia

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
	"nodeconverge/modules/containerd/nvidiatoml"
)

func init() { module.Register("containerd_nvidia", Module{}) }

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

// Args are the module's arguments; the defaults follow the GPU Operator.
type Args struct {
	Path         string    `yaml:"path"`
	Config       string    `yaml:"config"`
	ToolkitDir   string    `yaml:"toolkit_dir"`
	Runtimes     []Runtime `yaml:"runtimes"`
	SetAsDefault bool      `yaml:"set_as_default"`
	State        string    `yaml:"state"`
	Containerd   string    `yaml:"containerd"`
}

// Validate fills derived defaults and checks what a type cannot.
func (a *Args) Validate() error {
	if a.State != "present" && a.State != "absent" {
		return fmt.Errorf("state must be present or absent, not %q", a.State)
	}
	for _, p := range []string{a.Path, a.Config, a.ToolkitDir} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("path %q must be absolute", p)
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

// Check rebuilds the file and measures the candidate with the node's own
// containerd.
func (Module) Check(ctx context.Context, h transport.Reader, ma module.Args) (*module.Plan, error) {
	a := ma.(*Args)
	tree, err := ctrconf.Gather(ctx, h, a.Config, a.Containerd)
	if err != nil {
		return nil, fmt.Errorf("read containerd config: %w", err)
	}
	// Whether the runtime binaries are there is checked on the node, in
	// the round trip that dumps the candidate when there is one.
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
	var live *transport.FileInfo
	if tf := tree.File(a.Path); tf != nil {
		live = &transport.FileInfo{Path: a.Path, Exists: !tf.Missing, Content: tf.Content}
	} else {
		// No import loads the file: read it, so it is never clobbered.
		snap, err := h.Query(ctx, transport.Query{Files: []string{a.Path}})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", a.Path, err)
		}
		live = snap.File(a.Path)
	}
	names := make([]string, len(a.Runtimes))
	for i, r := range a.Runtimes {
		names[i] = r.Name
	}

	// The live dump comes with the ablation of every drop-in: the same
	// Stage request containerd_dropins makes, so a play that runs both
	// pays for it once (the transport caches it until the run writes).
	base, _, err := ctrconf.Ablate(ctx, h, tree, "")
	if err != nil {
		return nil, fmt.Errorf("dump live config: %w", err)
	}
	prefix := DumpRuntimesPrefix(tree.BinVersion)
	version := nvidiatoml.DetectVersion(live.Content)
	if version == 0 {
		version = tree.Version
	}
	if version == 0 {
		version = 2
	}
	if version > 3 {
		version = 3
	}
	rts := make([]nvidiatoml.Runtime, len(a.Runtimes))
	rtype, opts := runcTemplate(base, prefix)
	for i, r := range a.Runtimes {
		rts[i] = nvidiatoml.Runtime{Name: r.Name, RuntimeType: rtype, BinaryName: r.BinaryName, Options: opts}
	}
	cand, err := nvidiatoml.Rebuild(live.Content, nvidiatoml.Layout{Version: version}, rts, a.SetAsDefault, a.State == "present")
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: %w", a.Path, err)
	}

	plan := &module.Plan{}
	plan.Evidence = append(plan.Evidence, evidence("live tree", tree, base))
	after := base
	// A candidate that differs from the file only in zero values inside
	// the nvidia runtime tables (the GPU Operator writes runtime_engine =
	// "" and friends) loads exactly as the file does: every other byte is
	// the file's own, and a runtime entry's fields default to zero. The
	// live dump above already proves what the file does; no second dump,
	// no write.
	textChanged := !bytes.Equal(cand, live.Content) && !(live.Exists && sameButZeros(live.Content, cand, nvidiatoml.IsManaged(names)))
	if textChanged {
		effs, extra, err := ctrconf.DumpManyWith(ctx, h, tree, []ctrconf.Overrides{{a.Path: cand}}, binCheck)
		if err != nil {
			return nil, fmt.Errorf("dump candidate: %w", err)
		}
		if len(binCheck) > 0 {
			if err := binsMissing(extra[0]); err != nil {
				return nil, err
			}
		}
		after = effs[0]
		plan.Evidence = append(plan.Evidence, evidence("candidate tree with the rebuilt "+a.Path, tree, after))
		if !after.OK {
			return nil, &module.ValidationError{
				Msg:      fmt.Sprintf("the candidate %s does not load with %s; the live file is unchanged:\n%s", a.Path, tree.Bin, after.Err),
				Evidence: plan.Evidence,
			}
		}
	} else if len(binCheck) > 0 {
		snap, err := h.Query(ctx, transport.Query{Cmds: binCheck})
		if err != nil {
			return nil, fmt.Errorf("check runtime binaries: %w", err)
		}
		if err := binsMissing(snap.Cmds[0]); err != nil {
			return nil, err
		}
	}
	diff := ctrconf.Diff(base, after)
	if err := checkEffective(a, names, prefix, base, after, diff); err != nil {
		return nil, &module.ValidationError{Msg: err.Error(), Evidence: plan.Evidence}
	}
	if !writeNeeded(a, live, cand, base, diff) {
		return plan, nil
	}
	fc := module.FileChange{Action: module.Update, Path: a.Path, Before: live.Content, After: cand,
		BeforeHash: module.Hash(live.Content), AfterHash: module.Hash(cand)}
	if !live.Exists {
		fc.Action, fc.Before, fc.BeforeHash, fc.Mode = module.Create, nil, "", 0o644
	}
	plan.Files = []module.FileChange{fc}
	if base.OK {
		plan.Effective = diff
	} else {
		plan.Notes = append(plan.Notes, "the live config does not load ("+firstLine(base.Err)+"); the candidate tree loads")
		plan.Effective = []module.EffectiveChange{{Key: "(whole config)", Before: "does not load: " + firstLine(base.Err), After: "loads"}}
	}
	return plan, nil
}

// sameButZeros reports whether two TOML files parse to the same values once
// zero values are dropped inside nvidia runtime tables.
func sameButZeros(a, b []byte, nvidia func(string) bool) bool {
	var ma, mb map[string]any
	if toml.Unmarshal(a, &ma) != nil || toml.Unmarshal(b, &mb) != nil {
		return false
	}
	dropRuntimeZeros(ma, nil, nvidia)
	dropRuntimeZeros(mb, nil, nvidia)
	return reflect.DeepEqual(ma, mb)
}

// dropRuntimeZeros removes zero-valued leaves (and tables left empty) under
// any plugins.<id>.containerd.runtimes.<nvidia name>.
func dropRuntimeZeros(m map[string]any, path []string, nvidia func(string) bool) {
	n := len(path)
	inRuntime := n >= 5 && path[0] == "plugins" && path[2] == "containerd" && path[3] == "runtimes" && nvidia(path[4])
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			dropRuntimeZeros(sub, append(append([]string(nil), path...), k), nvidia)
			if inRuntime || (n >= 4 && path[0] == "plugins" && path[3] == "runtimes" && nvidia(k)) {
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
// mention nvidia runtimes at all (a shadowed block is a trap for the next
// person). With state present a rewrite is owed when the live tree does not
// load, the file does not parse (duplicated tables), or the daemon would
// load something different; formatting alone never triggers a write.
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

// checkEffective proves the candidate holds the requested runtimes and
// changes nothing else in the effective config.
func checkEffective(a *Args, names []string, prefix string, base, after *ctrconf.Effective, diff []module.EffectiveChange) error {
	if a.State == "present" {
		var bad []string
		for _, r := range a.Runtimes {
			k := prefix + "." + ctrconf.JoinKey(r.Name) + ".options.BinaryName"
			got, ok := after.Get(k)
			if !ok || got != fmt.Sprintf("%q", r.BinaryName) && got != r.BinaryName {
				bad = append(bad, fmt.Sprintf("%s (want %s, got %q)", k, r.BinaryName, got))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("after the change the node's containerd would still not load the requested runtimes:\n  %s\n"+
				"a later drop-in probably owns the CRI plugin; see `nodeconverge explain` or run containerd_dropins first",
				strings.Join(bad, "\n  "))
		}
	}
	if !base.OK {
		// The live tree does not load at all: "loads and holds the
		// runtimes" is the bar.
		return nil
	}
	var other []string
	for _, c := range diff {
		if !intended(a, names, prefix, c.Key) {
			other = append(other, fmt.Sprintf("%s: %q -> %q", c.Key, c.Before, c.After))
		}
	}
	if len(other) > 0 {
		sort.Strings(other)
		return fmt.Errorf("refusing: the change would also alter effective settings it does not own:\n  %s", strings.Join(other, "\n  "))
	}
	return nil
}

func intended(a *Args, names []string, prefix, key string) bool {
	if strings.HasSuffix(key, ".default_runtime_name") {
		return a.SetAsDefault || a.State == "absent"
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
	// state absent removes every nvidia* runtime, requested or not.
	return a.State == "absent" && strings.HasPrefix(strings.Trim(rest, `"`), "nvidia")
}

// runcTemplate takes runtime_type and the options of the effective runc
// entry, as nvidia-ctk does, so the nvidia runtimes inherit SystemdCgroup.
// Values come from the flattened dump (TOML value text), read back through
// the TOML parser so types survive.
func runcTemplate(base *ctrconf.Effective, prefix string) (string, map[string]any) {
	rtype := "io.containerd.runc.v2"
	opts := map[string]any{}
	if !base.OK {
		return rtype, opts
	}
	runc := prefix + ".runc."
	for k, text := range base.Flat() {
		rest, ok := strings.CutPrefix(k, runc)
		if !ok {
			continue
		}
		var v struct{ V any }
		if err := toml.Unmarshal([]byte("V = "+text), &v); err != nil {
			continue // a value the dump prints in a form we cannot re-read is not worth copying
		}
		switch {
		case rest == "runtime_type":
			if t, ok := v.V.(string); ok && t != "" {
				rtype = t
			}
		case strings.HasPrefix(rest, "options.") && !strings.Contains(strings.TrimPrefix(rest, "options."), "."):
			name := strings.TrimPrefix(rest, "options.")
			if name != "BinaryName" && !isZero(v.V) {
				opts[name] = v.V
			}
		}
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

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func evidence(what string, t *ctrconf.Tree, e *ctrconf.Effective) module.Evidence {
	out := e.Err
	if e.OK {
		out = fmt.Sprintf("loads %d files", len(e.Files))
	}
	return module.Evidence{What: what, Command: t.Bin + " --config <staged " + t.Main + "> config dump", OK: e.OK, Output: out, Required: true}
}

// Apply writes the rebuilt file atomically, keeping the old one in the
// run's backup.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	if len(p.Files) != 1 {
		return nil, errors.New("containerd_nvidia: plan has no file to write")
	}
	fc := p.Files[0]
	if _, err := h.Apply(ctx, []transport.Op{{Kind: transport.OpWrite, Path: fc.Path, Content: fc.After, Mode: fc.Mode, Backup: true}}); err != nil {
		return nil, fmt.Errorf("write %s: %w", fc.Path, err)
	}
	return &module.Result{Changed: true, Files: p.Files}, nil
}
