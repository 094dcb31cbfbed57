// Package sysctl is the `sysctl` module: it owns one sysctl.d file whole
// (never appends to it), keeps the kernel's live values at or above what the
// file asks for, and refuses a change that a later sysctl.d file would undo
// at the next boot. It is the fix for the incident's aftershock: containerd's
// CRI plugin failed to load because fs.inotify.max_user_instances was 128.
package sysctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

func init() {
	// ansible.posix.sysctl is Ansible's sysctl module, with its argument
	// names (name, value, sysctl_file, reload, sysctl_set, state): the
	// same module in the mode that owns only the named key's line of the
	// file.
	module.Register(module.Registration{Name: "sysctl", Aliases: []string{"ansible.posix.sysctl"}, Module: Module{}, Prefetch: Module{}.Prefetch, Data: func() any { return new(data) }})
}

// AnsibleDefaultFile is ansible.posix.sysctl's default sysctl_file.
const AnsibleDefaultFile = "/etc/sysctl.conf"

// DefaultPath is the file the module owns unless told otherwise.
const DefaultPath = "/etc/sysctl.d/99-inotify.conf"

// SearchDirs is the sysctl.d search order (systemd-sysctl and procps
// `sysctl --system`): a basename in an earlier directory masks the same
// basename in a later one; the surviving files apply in basename order.
var SearchDirs = []string{"/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d"}

// SysctlConf is read as if it were 99-sysctl.conf in the last directory,
// which is how Debian wires it (/etc/sysctl.d/99-sysctl.conf links to it).
const SysctlConf = "/etc/sysctl.conf"

// Args are the sysctl module's arguments. Either values (nodeconverge's
// form: the module owns the whole file at path) or name and value
// (ansible.posix.sysctl's form: the module owns only that key's lines of
// sysctl_file, and sets the live value exactly).
type Args struct {
	Path        string            `yaml:"path"`
	Values      map[string]string `yaml:"values"`
	ApplyLive   bool              `yaml:"apply_live"`
	Minimum     bool              `yaml:"minimum"`
	AllowShadow bool              `yaml:"allow_shadow"`

	// ansible.posix.sysctl's arguments.
	Name         string `yaml:"name"`
	Value        string `yaml:"value"`
	State        string `yaml:"state"`
	SysctlFile   string `yaml:"sysctl_file"`
	Reload       *bool  `yaml:"reload"`
	SysctlSet    *bool  `yaml:"sysctl_set"`
	IgnoreErrors bool   `yaml:"ignoreerrors"`

	// KeyOnly says the file is shared: only the wanted keys' lines are
	// the module's (set by Validate for the Ansible form; kept in saved
	// plans' arguments, never written in a playbook).
	KeyOnly bool `yaml:"-" json:",omitempty"`
}

// Validate checks what a type cannot, and turns the Ansible form into the
// module's own.
func (a *Args) Validate() error {
	if err := a.ansible(); err != nil {
		return err
	}
	switch {
	case !path.IsAbs(a.Path) || path.Clean(a.Path) != a.Path:
		return fmt.Errorf("path %q must be a clean absolute path", a.Path)
	case !strings.HasSuffix(a.Path, ".conf"):
		return fmt.Errorf("path %q must end in .conf: sysctl.d reads nothing else", a.Path)
	case len(a.Values) == 0:
		return errors.New("values must set at least one key")
	}
	for k, v := range a.Values {
		if nk := normKey(k); nk == "" || strings.ContainsAny(nk, " \t=*") || strings.Contains(nk, "..") {
			return fmt.Errorf("values: %q is not a sysctl key", k)
		}
		if normValue(v) == "" || strings.ContainsAny(v, "\n") {
			return fmt.Errorf("values: %s: %q is not a one-line, non-empty value", k, v)
		}
	}
	return nil
}

// ansible maps ansible.posix.sysctl's arguments onto the module's: name
// and value are the one key, sysctl_file (default /etc/sysctl.conf) is
// path, reload or sysctl_set set the live value, and it is set exactly
// (a higher live value is changed, as Ansible does).
func (a *Args) ansible() error {
	if a.Name == "" && a.Value == "" && a.State == "" && a.SysctlFile == "" && a.Reload == nil && a.SysctlSet == nil && !a.IgnoreErrors {
		return nil
	}
	switch {
	case a.Name == "":
		return errors.New("name is required with value, state, sysctl_file, reload or sysctl_set (ansible.posix.sysctl's form)")
	case len(a.Values) > 0:
		return errors.New("give either values (the whole file) or name and value (one key of sysctl_file), not both")
	case a.Path != DefaultPath && a.Path != "":
		return errors.New("path is the file of the values form; with name and value give sysctl_file")
	case a.State == "absent":
		return errors.New("state: absent is not supported: nodeconverge does not remove a key from a file; own a sysctl.d file with the values form and leave the key out")
	case a.State != "" && a.State != "present":
		return fmt.Errorf("state %q: only present is supported", a.State)
	case a.IgnoreErrors:
		return errors.New("ignoreerrors is not supported: a key the kernel does not have is an error")
	case a.Value == "":
		return errors.New("value is required")
	}
	a.Path = AnsibleDefaultFile
	if a.SysctlFile != "" {
		a.Path = a.SysctlFile
	}
	a.Values = map[string]string{a.Name: a.Value}
	a.ApplyLive = (a.Reload == nil || *a.Reload) || (a.SysctlSet != nil && *a.SysctlSet)
	a.Minimum = false
	a.KeyOnly = true
	a.Name, a.Value, a.State, a.SysctlFile, a.Reload, a.SysctlSet = "", "", "", "", nil, nil
	return nil
}

// Module implements module.Module for sysctl.
type Module struct{}

// NewArgs returns the defaults: the inotify file, applied live, live values
// above the wanted ones accepted.
func (Module) NewArgs() module.Args {
	return &Args{Path: DefaultPath, ApplyLive: true, Minimum: true}
}

// normKey writes a key as the kernel names it under /proc/sys, with dots:
// sysctl accepts net/ipv4/ip_forward too. A leading '-' (ignore errors)
// is dropped.
func normKey(k string) string {
	k = strings.TrimPrefix(strings.TrimSpace(k), "-")
	return strings.ReplaceAll(k, "/", ".")
}

// normValue is a value as the kernel normalises it: runs of spaces and tabs
// (multi-value keys such as net.ipv4.ip_local_port_range) are one space.
func normValue(v string) string { return strings.Join(strings.Fields(v), " ") }

func (a *Args) wanted() map[string]string {
	out := make(map[string]string, len(a.Values))
	for k, v := range a.Values {
		out[normKey(k)] = normValue(v)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func procPath(key string) string { return "/proc/sys/" + strings.ReplaceAll(key, ".", "/") }

// render is the whole file the module owns.
func render(want map[string]string) []byte {
	var b strings.Builder
	b.WriteString("# Managed by nodeconverge (module sysctl); the whole file is rewritten.\n")
	for _, k := range sortedKeys(want) {
		fmt.Fprintf(&b, "%s = %s\n", k, want[k])
	}
	return []byte(b.String())
}

// setting is one key assignment in a sysctl.d file.
type setting struct {
	File  string
	Line  int
	Key   string
	Value string
}

// parse reads a sysctl.d file the way sysctl does: '#' and ';' start
// comment lines, key = value, surrounding space ignored.
func parse(file string, b []byte) []setting {
	var out []setting
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		out = append(out, setting{File: file, Line: i + 1, Key: normKey(k), Value: normValue(v)})
	}
	return out
}

// atLeast says whether live satisfies want: equal by meaning, or, with
// minimum, both single integers and live the larger.
func atLeast(live, want string, minimum bool) bool {
	if live == want {
		return true
	}
	if !minimum {
		return false
	}
	l, err1 := strconv.ParseInt(live, 10, 64)
	w, err2 := strconv.ParseInt(want, 10, 64)
	return err1 == nil && err2 == nil && l >= w
}

// data is what Apply needs beyond the file change.
type data struct {
	Path    string            `json:"path"`
	Want    map[string]string `json:"want"`
	Live    []string          `json:"live,omitempty"`    // keys to set live
	Cmd     []string          `json:"command,omitempty"` // how
	Minimum bool              `json:"minimum"`
}

// query is everything Check reads, in one round trip: the file, the live
// values and every file of the sysctl.d search order.
func (a *Args) query() transport.Query {
	q := transport.Query{Files: []string{a.Path, SysctlConf}}
	for _, k := range sortedKeys(a.wanted()) {
		q.Files = append(q.Files, procPath(k))
	}
	for _, d := range SearchDirs {
		q.Globs = append(q.Globs, d+"/*.conf")
	}
	return q
}

// Prefetch lets the runner read what Check needs together with the other
// tasks' reads.
func (Module) Prefetch(margs module.Args) transport.Query { return margs.(*Args).query() }

// Check compares the file by meaning and the live values, and looks for a
// later sysctl.d file that would undo the wanted values at boot.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	want := a.wanted()
	keys := sortedKeys(want)
	q := a.query()
	snap, err := h.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read %s and the live values: %w", a.Path, err)
	}
	plan := &module.Plan{}

	// The file, compared by meaning.
	live := snap.File(a.Path)
	if live.IsDir {
		return nil, fmt.Errorf("%s is a directory", a.Path)
	}
	body := render(want)
	inFile := map[string]string{}
	for _, s := range parse(a.Path, live.Content) {
		inFile[s.Key] = s.Value
	}
	same := sameMap(inFile, want)
	if a.KeyOnly {
		// The file is shared: only the wanted keys' lines are ours.
		body = setKeys(live.Content, want)
		same = true
		for k, v := range want {
			if inFile[k] != v {
				same = false
			}
		}
	}
	if !live.Exists || !same {
		fc := module.FileChange{Path: a.Path, After: body, AfterHash: module.Hash(body), Mode: 0o644, Action: module.Create}
		if live.Exists {
			fc.Action, fc.Before, fc.BeforeHash, fc.Mode = module.Update, live.Content, module.Hash(live.Content), 0
			fc.Reasons = []string{"values differ"}
		}
		plan.Files = append(plan.Files, fc)
	}

	// Shadowing at boot.
	shadows := findShadows(snap, a.Path, want, a.Minimum)
	if len(shadows) > 0 {
		msg := fmt.Sprintf("%s would not hold at boot: %s", a.Path, strings.Join(shadows, "; "))
		if !a.AllowShadow {
			return nil, &module.ValidationError{
				Msg: msg + " (fix that file, or set allow_shadow: true)",
				Evidence: []module.Evidence{{What: "sysctl.d search order", Command: "read " + strings.Join(SearchDirs, ", ") + ", " + SysctlConf,
					OK: false, Output: strings.Join(shadows, "\n"), Required: true}},
			}
		}
		plan.Notes = append(plan.Notes, "allowed by allow_shadow: "+msg)
	}

	// Live values.
	d := data{Path: a.Path, Want: want, Minimum: a.Minimum}
	above := false
	var drift []string
	for _, k := range keys {
		pf := snap.File(procPath(k))
		if !pf.Exists {
			return nil, fmt.Errorf("sysctl %s: %s does not exist on this kernel", k, procPath(k))
		}
		lv := normValue(string(pf.Content))
		switch {
		case lv == want[k]:
		case atLeast(lv, want[k], a.Minimum):
			above = true
		default:
			drift = append(drift, k)
			plan.Effective = append(plan.Effective, module.EffectiveChange{Key: "live:" + k, Before: lv, After: want[k]})
			plan.Notes = append(plan.Notes, fmt.Sprintf("live %s is %s, wants %s", k, lv, want[k]))
		}
	}
	if a.ApplyLive && len(drift) > 0 {
		d.Live = drift
		// sysctl -p sets every key of the file; when a live value is
		// already above the wanted one, that would lower it, so only the
		// drifting keys are set.
		if above || a.KeyOnly {
			// In a shared file (the Ansible form) the other lines are
			// not ours to apply: only the module's keys are set.
			d.Cmd = []string{"sysctl", "-w"}
			for _, k := range drift {
				d.Cmd = append(d.Cmd, k+"="+want[k])
			}
		} else {
			d.Cmd = []string{"sysctl", "-p", a.Path}
		}
		plan.Commands = append(plan.Commands, strings.Join(d.Cmd, " "))
	} else if len(drift) > 0 {
		plan.Notes = append(plan.Notes, "apply_live is false: the live values change at the next boot")
	}
	if !plan.Changed() {
		return plan, nil
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode plan data: %w", err)
	}
	plan.Data = raw
	return plan, nil
}

// setKeys is a shared sysctl file with each wanted key set, as
// ansible.posix.sysctl rewrites it (fix_lines): every line stripped,
// comments, blank lines and lines without "=" kept, every other line
// written "key=value" and only the first line of each key kept, a wanted
// key's value replaced, a key no line sets added at the end.
func setKeys(old []byte, want map[string]string) []byte {
	text := strings.ReplaceAll(string(old), "\r\n", "\n")
	var out []string
	seen := map[string]bool{}
	if text != "" {
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			t := strings.TrimSpace(line)
			if t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, ";") || !strings.Contains(t, "=") {
				out = append(out, t)
				continue
			}
			k, v, _ := strings.Cut(t, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if seen[k] {
				continue
			}
			seen[k] = true
			if w, ok := want[k]; ok {
				v = w
			}
			out = append(out, k+"="+v)
		}
	}
	for _, k := range sortedKeys(want) {
		if !seen[k] {
			out = append(out, k+"="+want[k])
		}
	}
	return []byte(strings.Join(out, "\n") + "\n")
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// findShadows orders the sysctl.d files as the boot does and reports every
// setting of a wanted key that applies after own and leaves the key below
// (or, without minimum, different from) the wanted value.
func findShadows(snap *transport.Snapshot, own string, want map[string]string, minimum bool) []string {
	winner := map[string]string{} // basename -> path
	for _, d := range SearchDirs {
		for _, p := range snap.Globs[d+"/*.conf"] {
			b := path.Base(p)
			if _, ok := winner[b]; !ok {
				winner[b] = p
			}
		}
	}
	if snap.File(SysctlConf).Exists {
		if _, ok := winner["99-sysctl.conf"]; !ok {
			winner["99-sysctl.conf"] = SysctlConf
		}
	}
	ownBase := path.Base(own)
	if p, ok := winner[ownBase]; ok && p != own && dirRank(p) < dirRank(own) {
		// Another directory's file of the same name wins: own never loads.
		return []string{fmt.Sprintf("%s masks %s (same name, earlier directory)", p, own)}
	}
	winner[ownBase] = own
	names := make([]string, 0, len(winner))
	for b := range winner {
		names = append(names, b)
	}
	sort.Strings(names)
	var out []string
	after := false
	for _, b := range names {
		p := winner[b]
		if p == own {
			after = true
			continue
		}
		if !after {
			continue
		}
		f := snap.File(p)
		if f.IsDir || !f.Exists {
			continue
		}
		for _, s := range parse(p, f.Content) {
			if w, ok := want[s.Key]; ok && !atLeast(s.Value, w, minimum) {
				out = append(out, fmt.Sprintf("%s:%d sets %s = %s, after %s (wants %s)", s.File, s.Line, s.Key, s.Value, own, w))
			}
		}
	}
	return out
}

// dirRank is a file's directory's place in the search order; files outside
// it rank last.
func dirRank(p string) int {
	for i, d := range SearchDirs {
		if path.Dir(p) == d {
			return i
		}
	}
	return len(SearchDirs)
}

// Apply writes the file, sets the drifting live values, and reads them
// back: a kernel that refuses a value is an error here, not a surprise at
// the next re-check. The previous live values are kept (transport.OpKeep)
// before they change, so rolling the run back restores them too.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	var d data
	if err := json.Unmarshal(p.Data, &d); err != nil {
		return nil, fmt.Errorf("decode plan data: %w", err)
	}
	var ops []transport.Op
	for _, fc := range p.Files {
		ops = append(ops, transport.Op{Kind: transport.OpWrite, Path: fc.Path, Content: fc.After, Mode: fc.Mode, Backup: true})
	}
	if len(d.Cmd) > 0 {
		// The live values about to change are kept with the run's
		// backups, so a rollback of the run restores them along with
		// the file instead of leaving the kernel at the new values.
		for _, k := range d.Live {
			ops = append(ops, transport.Op{Kind: transport.OpKeep, Path: procPath(k), Backup: true})
		}
	}
	if _, err := h.Apply(ctx, ops); err != nil {
		return nil, err
	}
	res := &module.Result{Changed: true, Files: p.Files}
	if len(d.Cmd) == 0 {
		return res, nil
	}
	var touched []string
	for k := range d.Want {
		touched = append(touched, procPath(k))
	}
	// Setting kernel values changes /proc/sys and nothing else: what the
	// run read of other files stays valid.
	out, err := h.Exec(ctx, transport.Cmd{Argv: d.Cmd, Touches: touched})
	if err != nil {
		return nil, fmt.Errorf("set live values: %w", err)
	}
	res.Output = strings.TrimSpace(string(out.Stdout) + string(out.Stderr))
	if !out.OK() {
		return nil, fmt.Errorf("%s exited %d: %s", strings.Join(d.Cmd, " "), out.ExitCode, res.Output)
	}
	q := transport.Query{}
	for _, k := range d.Live {
		q.Files = append(q.Files, procPath(k))
	}
	snap, err := h.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read back live values: %w", err)
	}
	var got []string
	for _, k := range d.Live {
		lv := normValue(string(snap.File(procPath(k)).Content))
		if !atLeast(lv, d.Want[k], d.Minimum) {
			return nil, fmt.Errorf("after %s, live %s is %q, wanted %s", strings.Join(d.Cmd, " "), k, lv, d.Want[k])
		}
		got = append(got, k+"="+lv)
	}
	res.Msg = "live " + strings.Join(got, ", ")
	return res, nil
}
