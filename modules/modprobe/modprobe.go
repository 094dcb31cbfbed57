// Package modprobe is community.general's `modprobe`: a kernel module
// loaded (`state: present`, with `params`) or not (`absent`), and, with
// `persistent`, loaded at every boot from /etc/modules-load.d/NAME.conf
// with its options in /etc/modprobe.d/NAME.conf (or commented out of every
// file there), as Ansible's module does.
//
// One read decides it: the loaded modules (`lsmod`), the running kernel's
// built-in ones (/lib/modules/RELEASE/modules.builtin), every file of
// /etc/modules-load.d and /etc/modprobe.d (an earlier task's planned files
// included), and `modprobe -n` on the module, the node's own tool
// resolving it without loading anything: a module the node does not have
// fails the plan, in check mode too, before anything is written. Apply
// loads or removes it with argv (the name and params are data), then
// writes the files atomically with backups; the re-check reads lsmod again,
// so a load that did not take is a failure, not a warning.
package modprobe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/command"
)

func init() {
	module.Register(module.Registration{Name: "modprobe", Aliases: []string{"community.general.modprobe"}, Module: Module{}, Prefetch: Module{}.Prefetch, Data: func() any { return new(data) }})
}

// The directories Ansible's module reads and writes.
const (
	ModulesLoad = "/etc/modules-load.d"
	ModprobeD   = "/etc/modprobe.d"
)

// Args are community.general.modprobe's arguments.
type Args struct {
	Name       string `yaml:"name"`
	State      string `yaml:"state"`
	Params     string `yaml:"params"`
	Persistent string `yaml:"persistent"`

	paramArgv []string
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate checks the arguments as Ansible's argument spec does.
func (a *Args) Validate() error {
	switch {
	case a.Name == "":
		return errors.New("name is required")
	case !nameRe.MatchString(a.Name):
		return fmt.Errorf("name %q is not a kernel module name (letters, digits, - and _)", a.Name)
	case a.State != "present" && a.State != "absent":
		return fmt.Errorf("state %q: one of present, absent", a.State)
	case a.Persistent != "disabled" && a.Persistent != "present" && a.Persistent != "absent":
		return fmt.Errorf("persistent %q: one of disabled, present, absent", a.Persistent)
	}
	argv, err := command.SplitArgs(a.Params)
	if err != nil {
		return fmt.Errorf("params: %w", err)
	}
	a.paramArgv = argv
	return nil
}

// Module implements module.Module for modprobe.
type Module struct{}

// NewArgs returns Ansible's defaults.
func (Module) NewArgs() module.Args {
	return &Args{State: "present", Persistent: "disabled"}
}

func (a *Args) query() transport.Query {
	dry := []string{"modprobe", "-n"}
	if a.State == "absent" {
		dry = append(dry, "-r", a.Name)
	} else {
		dry = append(append(dry, a.Name), a.paramArgv...)
	}
	return transport.Query{
		Files: []string{"/proc/sys/kernel/osrelease"},
		Globs: []string{"/lib/modules/*/modules.builtin", ModulesLoad + "/*", ModprobeD + "/*"},
		Cmds:  []transport.Cmd{{Argv: []string{"lsmod"}}, {Argv: dry}},
	}
}

// Prefetch reads what Check needs with the play's other reads.
func (Module) Prefetch(margs module.Args) transport.Query { return margs.(*Args).query() }

type data struct {
	Cmd []string `json:"cmd,omitempty"`
}

// Check decides as Ansible's main() does.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	snap, err := h.Query(ctx, a.query())
	if err != nil {
		return nil, fmt.Errorf("read the kernel modules: %w", err)
	}
	lsmod, dry := snap.Cmds[0], snap.Cmds[1]
	switch {
	case lsmod.ExitCode == 127 || dry.ExitCode == 127:
		return nil, errors.New("lsmod or modprobe is not on the node (kmod)")
	case !lsmod.OK():
		return nil, fmt.Errorf("lsmod exited %d: %s", lsmod.ExitCode, strings.TrimSpace(string(lsmod.Stderr)))
	}
	loaded := a.loaded(snap)
	plan := &module.Plan{Vars: map[string]any{"name": a.Name, "params": a.Params, "state": a.State}}
	var d data
	switch {
	case a.State == "present" && !loaded:
		if !dry.OK() {
			return nil, errors.New(strings.TrimSpace(string(dry.Stderr) + string(dry.Stdout)))
		}
		d.Cmd = append([]string{"modprobe", a.Name}, a.paramArgv...)
	case a.State == "absent" && loaded:
		if !dry.OK() {
			return nil, errors.New(strings.TrimSpace(string(dry.Stderr) + string(dry.Stdout)))
		}
		d.Cmd = []string{"modprobe", "-r", a.Name}
	}
	if d.Cmd != nil {
		plan.Commands = append(plan.Commands, command.QuoteArgv(d.Cmd))
		plan.Evidence = append(plan.Evidence, module.Evidence{What: "the node resolves " + a.Name, Command: command.QuoteArgv(dryArgv(a)), OK: true, Required: true})
	}
	loadFiles, optFiles := files(snap, ModulesLoad), files(snap, ModprobeD)
	persistently := false
	for _, f := range loadFiles {
		if a.lineIn(f.Content, a.findModule()) {
			persistently = true
		}
	}
	permanent := a.permanentParams(optFiles)
	paramsSet := sameSet(strings.Fields(a.Params), permanent)
	changes := map[string]*module.FileChange{}
	var order []string
	change := func(f *transport.FileInfo, after []byte) {
		fc, ok := changes[f.Path]
		if !ok {
			fc = &module.FileChange{Path: f.Path}
			if f.Exists {
				fc.Action, fc.Before, fc.BeforeHash = module.Update, f.Content, module.Hash(f.Content)
			} else {
				fc.Action, fc.Mode = module.Create, 0o644
			}
			changes[f.Path] = fc
			order = append(order, f.Path)
		}
		fc.After, fc.AfterHash = after, module.Hash(after)
	}
	current := func(p string) *transport.FileInfo {
		if fc, ok := changes[p]; ok {
			return &transport.FileInfo{Path: p, Exists: true, Content: fc.After}
		}
		return snap.File(p)
	}
	switch {
	case a.Persistent == "present" && !(persistently && paramsSet):
		if !persistently {
			change(snap.File(path.Join(ModulesLoad, a.Name+".conf")), []byte(a.Name+"\n"))
		}
		if !paramsSet {
			for _, f := range optFiles {
				if out, ok := a.commentOut(f.Content, a.findParams()); ok {
					change(f, out)
				}
			}
			var b strings.Builder
			for i, p := range strings.Fields(a.Params) {
				if i > 0 {
					b.WriteByte('\n')
				}
				fmt.Fprintf(&b, "options %s %s", a.Name, p)
			}
			b.WriteByte('\n')
			change(current(path.Join(ModprobeD, a.Name+".conf")), []byte(b.String()))
		}
	case a.Persistent == "absent" && (persistently || len(permanent) > 0):
		for _, f := range loadFiles {
			if out, ok := a.commentOut(f.Content, a.findModule()); ok {
				change(f, out)
			}
		}
		for _, f := range optFiles {
			if out, ok := a.commentOut(f.Content, a.findParams()); ok {
				change(f, out)
			}
		}
	}
	for _, p := range order {
		fc := changes[p]
		if fc.Action == module.Update && bytes.Equal(fc.Before, fc.After) {
			continue
		}
		plan.Files = append(plan.Files, *fc)
	}
	if d.Cmd != nil {
		raw, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode plan: %w", err)
		}
		plan.Data = raw
	}
	return plan, nil
}

func dryArgv(a *Args) []string {
	if a.State == "absent" {
		return []string{"modprobe", "-n", "-r", a.Name}
	}
	return append([]string{"modprobe", "-n", a.Name}, a.paramArgv...)
}

// loaded is Ansible's module_loaded(): in the loaded list (- read as _),
// or built into the running kernel.
func (a *Args) loaded(snap *transport.Snapshot) bool {
	want := strings.ReplaceAll(a.Name, "-", "_")
	lines := strings.Split(string(snap.Cmds[0].Stdout), "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && (i > 0 || f[0] != "Module") && f[0] == want {
			return true
		}
	}
	release := strings.TrimSpace(string(snap.File("/proc/sys/kernel/osrelease").Content))
	builtin := snap.File("/lib/modules/" + release + "/modules.builtin")
	for _, l := range strings.Split(string(builtin.Content), "\n") {
		if strings.HasSuffix(strings.TrimRight(l, " \t\r"), "/"+a.Name+".ko") {
			return true
		}
	}
	return false
}

// files are the regular files of dir, as Ansible's os.listdir + isfile.
func files(snap *transport.Snapshot, dir string) []*transport.FileInfo {
	var out []*transport.FileInfo
	for _, p := range snap.Globs[dir+"/*"] {
		if f := snap.File(p); f.Exists && !f.IsDir {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Ansible's patterns (re_find_module, re_find_params, re_get_params_and_values).
func (a *Args) findModule() *regexp.Regexp {
	return regexp.MustCompile(`^ *` + regexp.QuoteMeta(a.Name) + ` *(?:[#;].*)?\n?\z`)
}

func (a *Args) findParams() *regexp.Regexp {
	return regexp.MustCompile(`^options ` + regexp.QuoteMeta(a.Name) + ` \w+=\S+ *(?:[#;].*)?\n?\z`)
}

func (a *Args) getParams() *regexp.Regexp {
	return regexp.MustCompile(`^options ` + regexp.QuoteMeta(a.Name) + ` (\w+=\S+) *(?:[#;].*)?\n?\z`)
}

// lines splits as Python's readlines.
func lines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

func (a *Args) lineIn(content []byte, re *regexp.Regexp) bool {
	for _, l := range lines(content) {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// commentOut puts a # before every line re matches. (Ansible's module
// also doubles every line ending of the file it rewrites, by joining
// readlines() with "\n"; nodeconverge keeps the other lines as they were.)
func (a *Args) commentOut(content []byte, re *regexp.Regexp) ([]byte, bool) {
	ls := lines(content)
	hit := false
	for i, l := range ls {
		if re.MatchString(l) {
			ls[i] = "#" + l
			hit = true
		}
	}
	return []byte(strings.Join(ls, "")), hit
}

func (a *Args) permanentParams(optFiles []*transport.FileInfo) []string {
	re := a.getParams()
	set := map[string]bool{}
	for _, f := range optFiles {
		for _, l := range lines(f.Content) {
			if m := re.FindStringSubmatch(l); m != nil {
				set[m[1]] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func sameSet(a, b []string) bool {
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	n := map[string]bool{}
	for _, x := range b {
		n[x] = true
	}
	if len(m) != len(n) {
		return false
	}
	for x := range m {
		if !n[x] {
			return false
		}
	}
	return true
}

// Apply loads or removes the module, then writes the files.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	res := &module.Result{Changed: true, Files: p.Files}
	if len(p.Data) > 0 {
		var d data
		if err := json.Unmarshal(p.Data, &d); err != nil {
			return nil, fmt.Errorf("decode plan: %w", err)
		}
		// Loading a module changes no file the run reads.
		out, err := h.Exec(ctx, transport.Cmd{Argv: d.Cmd, Touches: []string{}})
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", command.QuoteArgv(d.Cmd), err)
		}
		res.Output = strings.TrimSpace(string(out.Stderr) + string(out.Stdout))
		if !out.OK() {
			return nil, fmt.Errorf("%s exited %d: %s", command.QuoteArgv(d.Cmd), out.ExitCode, res.Output)
		}
	}
	if len(p.Files) > 0 {
		if _, err := module.ApplyFiles(ctx, h, p); err != nil {
			return nil, err
		}
	}
	return res, nil
}
