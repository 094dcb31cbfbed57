// Package containerdsettings is the `containerd_settings` module: values
// containerd must load, declared by key path (cri.registry.config_path,
// cri.sandbox_image, cri.runtimes.runc.options.SystemdCgroup, ...) so one
// playbook serves containerd 1.x and 2.x, and measured with the node's own
// `containerd config dump`, never read from files.
//
// It exists because of issue 12: NVIDIA's `nvidia-ctk runtime configure`
// rewrites its drop-in with a copy of the CRI table that lacks the registry
// config_path, and nothing else in a playbook notices, since every other
// task owns runtimes or files, not the effective value. This module owns
// the value.
//
// Where a value goes is decided from how the daemon merges: containerd 1.x
// takes a plugin's whole table from the last loaded file that mentions it,
// so the value goes into that file; 2.x merges per key, so the value goes
// into the last file that sets it, or a drop-in when no file does. Each is
// spelled as that file's config version spells it. Nothing is moved: a
// protected drop-in (the GPU Operator's) that overrides a value gets the
// value written into it. The candidate tree is dumped before anything is
// written; it must make every declared value effective and change no other
// effective setting.
package containerdsettings

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"gopkg.in/yaml.v3"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/containerd/ctrconf"
	"nodeconverge/modules/containerd/nvidiatoml"
	"nodeconverge/modules/containerd/runtimeopts"
)

func init() {
	module.Register(module.Registration{Name: "containerd_settings", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// Setting is one declared value.
type Setting struct {
	// Key is the logical key path as the playbook wrote it.
	Key string
	// Value is a string, bool, int64 or []any of strings.
	Value any
	def   keyDef
}

// Settings are the declared values in playbook order.
type Settings []Setting

// UnmarshalYAML reads the settings mapping, checking every key against the
// catalogue and every value against its key's type, so a typo or a wrong
// type fails at load, at the line of the offending key.
func (s *Settings) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return lineErr(n, "settings must be a mapping of key path to value")
	}
	var out Settings
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return lineErr(k, "settings: a key must be a key path such as cri.registry.config_path")
		}
		def, err := lookup(k.Value)
		if err != nil {
			return lineErr(k, "settings: "+err.Error())
		}
		val, err := decodeValue(v, def.typ)
		if err != nil {
			return lineErr(v, fmt.Sprintf("settings: %s: %v", k.Value, err))
		}
		out = append(out, Setting{Key: k.Value, Value: val, def: def})
	}
	*s = out
	return nil
}

// lineErr is a yaml.TypeError: the playbook loader turns its "line N:"
// into file:line:col of the node on that line.
func lineErr(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}

func decodeValue(v *yaml.Node, t valueType) (any, error) {
	wrong := func() error {
		got := strings.TrimPrefix(v.Tag, "!!")
		if v.Kind == yaml.SequenceNode {
			got = "a list"
		} else if v.Kind == yaml.MappingNode {
			got = "a mapping"
		}
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("wrong type: want %s, got %s", t, got)
		}
		return fmt.Errorf("wrong type: want %s, got %s %q", t, got, v.Value)
	}
	switch t {
	case tStrings:
		if v.Kind != yaml.SequenceNode {
			return nil, wrong()
		}
		out := make([]any, 0, len(v.Content))
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Tag != "!!str" {
				return nil, fmt.Errorf("wrong type: want a list of strings, element %q is not a string", e.Value)
			}
			out = append(out, e.Value)
		}
		return out, nil
	case tString:
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			return nil, wrong()
		}
		return v.Value, nil
	case tBool:
		var b bool
		if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
			return nil, wrong()
		}
		return b, nil
	default:
		var i int64
		if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&i) != nil {
			return nil, wrong()
		}
		return i, nil
	}
}

// DefaultDropin is where containerd 2.x gets values no loaded file sets,
// when an import of the main config loads it.
const DefaultDropin = "/etc/containerd/conf.d/50-nodeconverge.toml"

// Args are the module's arguments.
type Args struct {
	Config     string   `yaml:"config"`
	Containerd string   `yaml:"containerd"`
	Dropin     string   `yaml:"dropin"`
	Settings   Settings `yaml:"settings"`
}

// Validate checks what the types cannot.
func (a *Args) Validate() error {
	if len(a.Settings) == 0 {
		return errors.New("settings is empty: declare at least one value, e.g. cri.registry.config_path: /etc/containerd/certs.d")
	}
	for _, p := range []string{a.Config, a.Dropin} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("path %q must be a clean absolute path", p)
		}
	}
	return nil
}

// Module implements module.Module.
type Module struct{}

// NewArgs returns the defaults: the packaged main config and its conf.d.
func (Module) NewArgs() module.Args {
	return &Args{Config: "/etc/containerd/config.toml", Containerd: ctrconf.DefaultBin, Dropin: DefaultDropin}
}

// Prefetch is the containerd tree, the same read every containerd module
// makes.
func (Module) Prefetch(ma module.Args) transport.Query {
	a := ma.(*Args)
	return ctrconf.PrefetchQuery(a.Config, a.Containerd)
}

// want is the canonical text of the declared value, as Flatten shows it.
func (s Setting) want() string { return ctrconf.Canonical(s.Value) }

// measure reads the setting from a dump the way that daemon version
// decodes it: options through runtimeopts (2.x: case-insensitive, the later
// key wins), everything else by its exact key.
func (s Setting) measure(e *ctrconf.Effective, major int) (string, bool) {
	path := s.def.dumpPath(major)
	if s.def.option == "" {
		return e.Get(ctrconf.JoinKey(path...))
	}
	var node any = e.Values
	for _, seg := range path[:len(path)-1] {
		m, ok := node.(map[string]any)
		if !ok {
			return "", false
		}
		node = m[seg]
	}
	opts, _ := node.(map[string]any)
	v, _, ok := runtimeopts.Decode(major, opts, s.def.option)
	if !ok {
		return "", false
	}
	return ctrconf.Canonical(v), true
}

// owns reports whether a dump key belongs to the setting: its own key, and
// for an option every spelling of it the daemon would read as the same.
func (s Setting) owns(key string, major int) bool {
	own := ctrconf.JoinKey(s.def.dumpPath(major)...)
	if key == own {
		return true
	}
	if s.def.option == "" {
		return false
	}
	segs, ownSegs := ctrconf.SplitKey(key), ctrconf.SplitKey(own)
	n := len(ownSegs)
	return len(segs) == n && slices.Equal(segs[:n-1], ownSegs[:n-1]) && strings.EqualFold(segs[n-1], ownSegs[n-1])
}

// Declares implements ctrconf.Owner: within a play, a change another task
// makes that brings one of these keys to its declared value is this task's
// value, not a reason for that task to refuse.
func (a *Args) Declares(key string, major int) (string, bool) {
	for _, s := range a.Settings {
		if s.owns(key, major) {
			return s.want(), true
		}
	}
	return "", false
}

// bringsZero reports whether a change is a field of a runtime the setting
// defines appearing (or going) at its zero value: a runtime that was not
// configured at all (nvidia-ctk left only its own) is decoded into a struct
// when a file declares it, and the dump then prints every field of it.
func (s Setting) bringsZero(c module.EffectiveChange, major int) bool {
	if s.def.runtime == "" || c.Before != "" && c.After != "" {
		return false
	}
	rt := ctrconf.JoinKey(append(s.def.dumpPath(major)[:2], "containerd", "runtimes", s.def.runtime)...)
	if !strings.HasPrefix(c.Key, rt+".") {
		return false
	}
	v := c.Before + c.After
	return v == `""` || v == "false" || v == "0" || v == "[]" || v == "{}"
}

// decider is the file whose text decides a setting's effective value, as
// the load order and the daemon's merge rule say, with the reason.
type decider struct {
	file *ctrconf.File // nil: containerd's built-in default
	sets bool          // the file writes the key (else it resets it to the default)
	why  string
}

func decide(t *ctrconf.Tree, s Setting) decider {
	major := t.Major()
	if major < 2 {
		var owner *ctrconf.File
		for i := range t.Files {
			if f := &t.Files[i]; !f.Missing && slices.Contains(f.Plugins, ctrconf.CRIPlugin) {
				owner = f
			}
		}
		if owner == nil {
			return decider{why: fmt.Sprintf("containerd's built-in default: no loaded file mentions %s", ctrconf.CRIPlugin)}
		}
		if _, ok := writes(owner, s, major); ok {
			return decider{file: owner, sets: true, why: fmt.Sprintf("set by %s, the last file containerd 1.x loads that mentions %s", owner.Path, ctrconf.CRIPlugin)}
		}
		return decider{file: owner, why: fmt.Sprintf("reset to containerd's default by %s: it is the last file containerd 1.x loads that mentions %s, and 1.x takes that plugin's whole table from it", owner.Path, ctrconf.CRIPlugin)}
	}
	for i := len(t.Files) - 1; i >= 0; i-- {
		f := &t.Files[i]
		if f.Missing {
			continue
		}
		if _, ok := writes(f, s, major); ok {
			return decider{file: f, sets: true, why: fmt.Sprintf("set by %s, the last file containerd %d.x loads that sets it", f.Path, major)}
		}
	}
	return decider{why: "containerd's built-in default: no loaded file sets it"}
}

// writes is the value text f writes for the setting, under the name the
// daemon shows (a version 2 file's key migrated under 2.x).
func writes(f *ctrconf.File, s Setting, major int) (string, bool) {
	keys := f.EffectiveKeys(major)
	own := ctrconf.JoinKey(s.def.dumpPath(major)...)
	if v, ok := keys[own]; ok {
		return v, true
	}
	if s.def.option != "" && major >= 2 {
		for k, v := range keys {
			if s.owns(k, major) {
				return v, true
			}
		}
	}
	return "", false
}

// edit is one file the plan rewrites.
type edit struct {
	path   string
	live   []byte
	exists bool
	// spellings are the config versions to spell keys in, preferred first;
	// a version 2 file under 2.x may take either, and the dumps decide.
	spellings []int
	settings  []Setting
	// carried are runtime keys written with the value they already have,
	// before the settings (containerd 1.x only, see carryRuntime).
	carried []carriedKey
}

// carriedKey is one key of the CRI runtime plugin (the path below the
// plugin's table) and its effective value.
type carriedKey struct {
	rel   []string
	value any
}

// Check measures every declared value in the node's effective config and,
// for those that are not effective, builds and dumps the candidate tree.
func (Module) Check(ctx context.Context, h transport.Reader, ma module.Args) (*module.Plan, error) {
	a := ma.(*Args)
	tree, err := ctrconf.Gather(ctx, h, a.Config, a.Containerd)
	if err != nil {
		return nil, fmt.Errorf("read containerd config: %w", err)
	}
	// The live dump: a staged unit of its own, so every containerd task
	// of a play, and the re-check after apply on the tree a plan proved,
	// share one run of containerd per tree content.
	base, err := ctrconf.Dump(ctx, h, tree, nil)
	if err != nil {
		return nil, fmt.Errorf("dump live config: %w", err)
	}
	plan := &module.Plan{}
	plan.Evidence = append(plan.Evidence, ctrconf.DumpEvidence("live tree", tree, base))
	if !base.OK {
		return nil, &module.ValidationError{Msg: fmt.Sprintf("the node's containerd config does not load, so no value can be measured: %s", base.ErrLine()), Evidence: plan.Evidence}
	}
	major := tree.Major()

	var pending []Setting
	deciders := map[string]decider{}
	for _, s := range a.Settings {
		d := decide(tree, s)
		deciders[s.Key] = d
		have, ok := s.measure(base, major)
		if ok && have == s.want() {
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s = %s: effective, %s", s.Key, have, d.why))
			continue
		}
		if !ok {
			have = "(not set)"
		}
		plan.Drift = append(plan.Drift, fmt.Sprintf("%s: not effective: declared %s, containerd %d.x loads %s, %s", s.Key, s.want(), major, have, d.why))
		pending = append(pending, s)
	}
	if len(pending) == 0 {
		return plan, nil
	}

	edits, err := a.placeAll(ctx, h, tree, base, pending, deciders, plan)
	if err != nil {
		return nil, err
	}
	nv := 1
	for _, e := range edits {
		nv = max(nv, len(e.spellings))
	}
	variants := make([]ctrconf.Overrides, nv)
	cands := make([]map[string][]byte, nv)
	for i := range variants {
		variants[i], cands[i] = ctrconf.Overrides{}, map[string][]byte{}
		for _, e := range edits {
			c, err := e.render(e.spellings[min(i, len(e.spellings)-1)])
			if err != nil {
				return nil, &module.ValidationError{Msg: err.Error(), Evidence: plan.Evidence}
			}
			variants[i][e.path], cands[i][e.path] = c, c
		}
	}
	effs, err := ctrconf.DumpMany(ctx, h, tree, variants)
	if err != nil {
		return nil, fmt.Errorf("dump candidate: %w", err)
	}
	var errs []string
	chosen := -1
	var diff []module.EffectiveChange
	for i, eff := range effs {
		plan.Evidence = append(plan.Evidence, ctrconf.DumpEvidence(fmt.Sprintf("candidate tree %d", i+1), tree, eff))
		d, err := verify(ctx, tree, pending, a.Settings, base, eff, major)
		if err == nil {
			chosen, diff = i, d
			break
		}
		errs = append(errs, err.Error())
	}
	if chosen < 0 {
		return nil, &module.ValidationError{Msg: "refusing to write; the live files are unchanged: " + strings.Join(dedup(errs), "\n"), Evidence: plan.Evidence}
	}
	for _, e := range edits {
		after := cands[chosen][e.path]
		fc := module.FileChange{Action: module.Update, Path: e.path, Before: e.live, After: after,
			BeforeHash: module.Hash(e.live), AfterHash: module.Hash(after)}
		if !e.exists {
			fc.Action, fc.Before, fc.BeforeHash, fc.Mode = module.Create, nil, "", 0o644
		}
		plan.Files = append(plan.Files, fc)
	}
	if r := ctrconf.PlatformRefusal(tree, plan.Files); r != "" {
		return nil, &module.ValidationError{Msg: r, Evidence: plan.Evidence}
	}
	plan.Effective = ctrconf.Attribute(tree, diff)
	return plan, nil
}

// placeAll decides, for each value that is not effective, the file it goes
// into and how that file spells it.
func (a *Args) placeAll(ctx context.Context, h transport.Reader, tree *ctrconf.Tree, base *ctrconf.Effective, pending []Setting, deciders map[string]decider, plan *module.Plan) ([]*edit, error) {
	major := tree.Major()
	byPath := map[string]*edit{}
	var edits []*edit
	add := func(path string, s Setting) error {
		e := byPath[path]
		if e == nil {
			e = &edit{path: path}
			if f := tree.File(path); f != nil {
				e.live, e.exists = f.Content, !f.Missing
				if !f.Parses && e.exists {
					return fmt.Errorf("%s does not parse (%s): run containerd_nvidia state: repair or fix it first", path, f.ParseErr)
				}
			} else {
				snap, err := h.Query(ctx, transport.Query{Files: []string{path}})
				if err != nil {
					return fmt.Errorf("read %s: %w", path, err)
				}
				fi := snap.File(path)
				e.live, e.exists = fi.Content, fi.Exists
			}
			e.spellings = spellings(tree, path, e.exists, major)
			byPath[path] = e
			edits = append(edits, e)
		}
		e.settings = append(e.settings, s)
		return nil
	}
	for _, s := range pending {
		target, why := a.place(tree, deciders[s.Key])
		plan.Notes = append(plan.Notes, fmt.Sprintf("%s goes into %s: %s", s.Key, target, why))
		if err := add(target, s); err != nil {
			return nil, &module.ValidationError{Msg: err.Error(), Evidence: plan.Evidence}
		}
		if e := byPath[target]; major < 2 && s.def.runtime != "" {
			carryRuntime(e, tree.File(target), base, s.def.runtime)
		}
	}
	return edits, nil
}

// carryRuntime: containerd 1.x decodes a runtime's table from one file as a
// whole, so a file that sets one option of a runtime it does not define
// (the built-in runc) would replace the runtime's type and every other
// option with zeros. The runtime's effective runtime_type and options are
// written along, once per file, so only the declared key changes.
func carryRuntime(e *edit, f *ctrconf.File, base *ctrconf.Effective, rt string) {
	prefix := ctrconf.JoinKey("plugins", ctrconf.CRIPlugin, "containerd", "runtimes", rt) + "."
	if f != nil {
		for k := range f.EffectiveKeys(1) {
			if strings.HasPrefix(k, prefix) {
				return
			}
		}
	}
	for _, c := range e.carried {
		if c.rel[2] == rt {
			return
		}
	}
	var node any = base.Values
	for _, seg := range []string{"plugins", ctrconf.CRIPlugin, "containerd", "runtimes", rt} {
		m, ok := node.(map[string]any)
		if !ok {
			return
		}
		node = m[seg]
	}
	runtime, _ := node.(map[string]any)
	tbl := []string{"containerd", "runtimes", rt}
	if v, ok := runtime["runtime_type"].(string); ok {
		e.carried = append(e.carried, carriedKey{append(slices.Clone(tbl), "runtime_type"), v})
	}
	opts, _ := runtime["options"].(map[string]any)
	for _, k := range sortedNames(opts) {
		if _, nested := opts[k].(map[string]any); !nested {
			e.carried = append(e.carried, carriedKey{append(slices.Clone(tbl), "options", k), opts[k]})
		}
	}
}

// place is the file a value must be written into to take effect without
// shadowing anything, from the file that decides it now.
func (a *Args) place(t *ctrconf.Tree, d decider) (string, string) {
	if t.Major() < 2 {
		if d.file != nil {
			return d.file.Path, "containerd 1.x takes the CRI plugin's whole table from it; a value anywhere else would not load, and a new file would shadow it"
		}
		return t.Main, fmt.Sprintf("no loaded file mentions %s", ctrconf.CRIPlugin)
	}
	if d.file != nil {
		return d.file.Path, "it is the last file that sets the key, and containerd 2.x takes each key from the last file that sets it; the file stays where it is"
	}
	if loads(t, a.Dropin) {
		return a.Dropin, "no loaded file sets the key; containerd 2.x merges drop-ins per key"
	}
	return t.Main, fmt.Sprintf("no loaded file sets the key and no import of %s loads %s", t.Main, a.Dropin)
}

// loads reports whether the tree loads path (an existing file, or a new one
// an import glob would pick up).
func loads(t *ctrconf.Tree, path string) bool {
	if t.File(path) != nil {
		return true
	}
	for _, pat := range t.Imports {
		if ok, err := filepath.Match(pat, path); err == nil && ok {
			return true
		}
	}
	return false
}

// spellings are the config versions a file's keys may be spelled in,
// preferred first. containerd 1.x reads version 2. Under 2.x a version 3
// file (and a new file, written as version 3) is spelled version 3; an
// older file is migrated by the daemon, so its own layout comes first, and
// version 3 names second (AKS writes `version = 2` with 2.x plugin names).
func spellings(t *ctrconf.Tree, path string, exists bool, major int) []int {
	f := t.File(path)
	if f != nil && exists && f.Version <= 1 && nvidiatoml.UsesV1CRIName(f.Content) {
		// Every containerd migrates `cri` to the long id: a key under the
		// long id would collide with the file's own table.
		return []int{1}
	}
	if major < 2 {
		return []int{2}
	}
	switch {
	case !exists && t.Version == 2:
		// A new drop-in beside a version 2 main config is spelled as the
		// main file spells it first: containerd 2.1.5 drops the main
		// file's CRI values when a version 3 drop-in joins a version 2
		// main config (Flatcar, Azure Linux 3; issue 28 #4), and every 2.x
		// migrates a version 2 drop-in as it migrates the main file. The
		// dumps decide; version 3 is staged second.
		return []int{2, 3}
	case !exists:
		return []int{3}
	case f == nil:
		return []int{2, 3}
	case f.Version >= 3:
		return []int{3}
	case slices.Contains(f.Plugins, ctrconf.CRIRuntimePlugin) || slices.Contains(f.Plugins, ctrconf.CRIImagesPlugin):
		return []int{3, 2}
	}
	return []int{2, 3}
}

// render is the edited file with every setting spelled in version ver.
func (e *edit) render(ver int) ([]byte, error) {
	out := e.live
	if !e.exists {
		out = []byte(fmt.Sprintf("# Written by nodeconverge (containerd_settings).\nversion = %d\n", ver))
	}
	for _, c := range e.carried {
		plugin := ctrconf.CRIPlugin
		if ver == 1 {
			plugin = "cri"
		}
		path := append([]string{"plugins", plugin}, c.rel...)
		var err error
		if out, err = nvidiatoml.SetKey(out, path, c.value, false); err != nil {
			return nil, fmt.Errorf("write %s into %s: %w", ctrconf.JoinKey(path...), e.path, err)
		}
	}
	for _, s := range e.settings {
		var err error
		out, err = nvidiatoml.SetKey(out, s.def.filePath(ver), s.Value, s.def.option != "")
		if err != nil {
			return nil, fmt.Errorf("write %s into %s: %w", s.Key, e.path, err)
		}
	}
	var m map[string]any
	if err := toml.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("cannot place the values in %s without rewriting it: the edited file is not valid TOML (%v); the table is probably defined inline or by dotted keys", e.path, err)
	}
	return out, nil
}

// verify proves a candidate dump makes every declared value effective and
// changes no other effective setting.
func verify(ctx context.Context, t *ctrconf.Tree, pending, all []Setting, base, eff *ctrconf.Effective, major int) ([]module.EffectiveChange, error) {
	if !eff.OK {
		return nil, fmt.Errorf("the candidate tree does not load with %s:\n%s", t.Bin, eff.Err)
	}
	var bad []string
	for _, s := range all {
		if have, ok := s.measure(eff, major); !ok || have != s.want() {
			if !ok {
				have = "(not set)"
			}
			bad = append(bad, fmt.Sprintf("%s: declared %s, the candidate loads %s", s.Key, s.want(), have))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("after the change containerd %d.x would still not load:\n  %s", major, strings.Join(bad, "\n  "))
	}
	diff := ctrconf.Diff(base, eff)
	var other []string
	for _, c := range diff {
		if slices.ContainsFunc(all, func(s Setting) bool { return s.owns(c.Key, major) || s.bringsZero(c, major) }) {
			continue
		}
		if ctrconf.PlayDeclares(ctx, c.Key, c.After, major) != "" {
			// Another task of the play declares this value: its change.
			continue
		}
		other = append(other, fmt.Sprintf("%s: %q -> %q", c.Key, c.Before, c.After))
	}
	if len(other) > 0 {
		return nil, fmt.Errorf("the change would also alter effective settings it does not declare:\n  %s", strings.Join(other, "\n  "))
	}
	if c := ctrconf.RegistryConflict(eff); c != "" {
		return nil, fmt.Errorf("%s (the CRI plugin would not load after the restart)", c)
	}
	return diff, nil
}

func dedup(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// Apply writes the planned files atomically, the old ones kept in the run's
// backup; owner and mode of an existing file are kept.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	return module.ApplyFiles(ctx, h, p)
}
