// Package file is Ansible's `file` module: a path is a directory, a
// regular file (its mode and ownership), a symbolic link, touched, or
// absent. Check reads the path's state with one read-only command and
// plans exactly what differs; a second run plans nothing (but touch,
// which, as in Ansible, changes the times on every run).
//
// What Apply does: removing a file and changing a regular file's mode or
// ownership go through the transport's atomic ops (backed up, undone by a
// rollback); creating a directory or a link, and changing a directory's
// mode or ownership, are commands run with argv (no shell) that a rollback
// does not undo, and the plan says which. A directory is never removed
// (state: absent on a directory is refused): nodeconverge does not delete
// trees.
package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/copy"
)

func init() {
	module.Register(module.Registration{Name: "file", Module: Module{}, ImperativePlan: Module{}.ImperativePlan, Data: func() any { return new(data) }})
}

// Args are Ansible's names; path has the aliases dest and name.
type Args struct {
	Path    string `yaml:"path"`
	Dest    string `yaml:"dest"`
	Name    string `yaml:"name"`
	State   string `yaml:"state"`
	Mode    string `yaml:"mode"`
	Owner   string `yaml:"owner"`
	Group   string `yaml:"group"`
	Src     string `yaml:"src"`
	Force   bool   `yaml:"force"`
	Recurse bool   `yaml:"recurse"`
}

// Validate checks what a type cannot and settles the aliases.
func (a *Args) Validate() error {
	n := 0
	for _, p := range []string{a.Path, a.Dest, a.Name} {
		if p != "" {
			n++
			a.Path = p
		}
	}
	a.Dest, a.Name = "", ""
	switch {
	case n == 0:
		return errors.New("path is required")
	case n > 1:
		return errors.New("give path once (dest and name are its aliases)")
	case !path.IsAbs(a.Path):
		return fmt.Errorf("path %q must be an absolute path", a.Path)
	case path.Clean(a.Path) == "/":
		return errors.New("path / is not managed")
	case a.Recurse:
		return errors.New("recurse is not supported: give each path its own task")
	}
	a.Path = path.Clean(a.Path)
	switch a.State {
	case "", "file", "directory", "absent", "touch":
		if a.Src != "" {
			return fmt.Errorf("src is for state: link, not %q", a.State)
		}
	case "link":
		if a.Src == "" {
			return errors.New("state: link needs src (what the link points to)")
		}
	case "hard":
		return errors.New("state: hard is not supported: use a symbolic link (state: link)")
	default:
		return fmt.Errorf("state %q: one of file, directory, link, touch, absent", a.State)
	}
	if a.Mode != "" {
		if _, err := copy.ParseMode(a.Mode); err != nil {
			return err
		}
	}
	return nil
}

// Module implements module.Module for file.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

// live is a path's state as the probe reports it.
type live struct {
	kind         string // absent, file, directory, link, other
	target       string // a link's target
	mode         fs.FileMode
	owner, group string
	uid, gid     string
}

// probe prints the path's kind, a link's target, and the mode and
// ownership of what it is (a link's own for a link). The path is an
// argument, never shell text.
const probe = `p=$1
if [ -L "$p" ]; then echo link; readlink -- "$p"; stat -c '%a %U %G %u %g' -- "$p"
elif [ -d "$p" ]; then echo directory; echo; stat -c '%a %U %G %u %g' -- "$p"
elif [ -f "$p" ]; then echo file; echo; stat -c '%a %U %G %u %g' -- "$p"
elif [ -e "$p" ]; then echo other; echo; echo
else echo absent; echo; echo
fi`

func readLive(ctx context.Context, h transport.Reader, p string) (*live, error) {
	// Reads p: the run's own writes to p (this module's, or another
	// task's) drop the cached answer, so the re-check after apply sees
	// them.
	snap, err := h.Query(ctx, transport.Query{Cmds: []transport.Cmd{{Argv: []string{"sh", "-c", probe, "sh", p}, Reads: []string{p}}}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(snap.Cmds) != 1 || !snap.Cmds[0].OK() {
		return nil, fmt.Errorf("read %s: the probe failed", p)
	}
	lines := strings.Split(string(snap.Cmds[0].Stdout), "\n")
	for len(lines) < 3 {
		lines = append(lines, "")
	}
	l := &live{kind: lines[0], target: lines[1]}
	if f := strings.Fields(lines[2]); len(f) == 5 {
		m, _ := strconv.ParseUint(f[0], 8, 32)
		l.mode, l.owner, l.group, l.uid, l.gid = fs.FileMode(m), f[1], f[2], f[3], f[4]
	}
	return l, nil
}

// data is what Apply needs: the commands to run, in order.
type data struct {
	Cmds [][]string `json:"cmds,omitempty"`
	// Touch says the plan touches an existing path: it plans the same on
	// every run.
	Touch bool `json:"touch,omitempty"`
}

// ImperativePlan says a touch of an existing path is not re-checked: it
// changes the times on every run.
func (Module) ImperativePlan(p *module.Plan) bool {
	var d data
	return len(p.Data) > 0 && json.Unmarshal(p.Data, &d) == nil && d.Touch
}

// Check compares the path with the wanted state.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	l, err := readLive(ctx, h, a.Path)
	if err != nil {
		return nil, err
	}
	state := a.State
	if state == "" {
		// Ansible's default: the path's current state, else file.
		state = "file"
		if l.kind == "directory" || l.kind == "link" {
			state = l.kind
		}
	}
	plan := &module.Plan{}
	var d data
	var want fs.FileMode
	if a.Mode != "" {
		want, _ = copy.ParseMode(a.Mode)
	}
	// attrs plans mode and ownership of what exists at the path.
	attrs := func(isLink bool) []string {
		var why []string
		if a.Mode != "" && !isLink && l.mode != want {
			why = append(why, fmt.Sprintf("mode %04o -> %04o", l.mode, want))
		}
		if a.Owner != "" && a.Owner != l.owner && a.Owner != l.uid {
			why = append(why, fmt.Sprintf("owner %s -> %s", l.owner, a.Owner))
		}
		if a.Group != "" && a.Group != l.group && a.Group != l.gid {
			why = append(why, fmt.Sprintf("group %s -> %s", l.group, a.Group))
		}
		return why
	}
	cmdAttrs := func(isLink bool) {
		chown := []string{"chown"}
		if isLink {
			chown = append(chown, "-h")
		}
		if a.Owner != "" || a.Group != "" {
			og := a.Owner
			if a.Group != "" {
				og += ":" + a.Group
			}
			d.Cmds = append(d.Cmds, append(chown, "--", og, a.Path))
		}
		if a.Mode != "" && !isLink {
			d.Cmds = append(d.Cmds, []string{"chmod", "--", fmt.Sprintf("%04o", want), a.Path})
		}
	}
	switch state {
	case "absent":
		switch l.kind {
		case "absent":
			return plan, nil
		case "directory":
			return nil, fmt.Errorf("%s is a directory: nodeconverge does not remove directories", a.Path)
		}
		plan.Files = append(plan.Files, module.FileChange{Action: module.Delete, Path: a.Path, Reasons: []string{"state: absent"}})
		return plan, nil
	case "file":
		switch l.kind {
		case "absent":
			return nil, fmt.Errorf("%s does not exist (state: file does not create files; use state: touch, or copy)", a.Path)
		case "file":
		default:
			return nil, fmt.Errorf("%s is a %s, not a regular file", a.Path, l.kind)
		}
		why := attrs(false)
		if len(why) == 0 {
			return plan, nil
		}
		return fileAttrPlan(ctx, h, a, want, why)
	case "touch":
		switch l.kind {
		case "absent":
			mode := want
			if mode == 0 {
				mode = 0o644
			}
			plan.Files = append(plan.Files, module.FileChange{Action: module.Create, Path: a.Path, After: []byte{}, AfterHash: module.Hash([]byte{}), Mode: mode, Owner: a.Owner, Group: a.Group, Reasons: []string{"state: touch"}})
		case "directory", "file":
			// As in Ansible, touch changes the times on every run.
			d.Cmds = append(d.Cmds, []string{"touch", "--", a.Path})
			plan.Notes = append(plan.Notes, "state: touch updates the times of "+a.Path+" on every run")
			if why := attrs(false); len(why) > 0 {
				plan.Notes = append(plan.Notes, why...)
				cmdAttrs(false)
			}
		default:
			return nil, fmt.Errorf("%s is a %s", a.Path, l.kind)
		}
		// The next run touches it again: not re-checked.
		d.Touch = true
	case "directory":
		switch l.kind {
		case "absent":
			d.Cmds = append(d.Cmds, []string{"mkdir", "-p", "--", a.Path})
			plan.Notes = append(plan.Notes, "create directory "+a.Path)
			cmdAttrs(false)
		case "directory":
			why := attrs(false)
			if len(why) == 0 {
				return plan, nil
			}
			plan.Notes = append(plan.Notes, why...)
			cmdAttrs(false)
		default:
			return nil, fmt.Errorf("%s exists and is a %s, not a directory", a.Path, l.kind)
		}
	case "link":
		switch {
		case l.kind == "link" && l.target == a.Src:
			why := attrs(true)
			if len(why) == 0 {
				return plan, nil
			}
			plan.Notes = append(plan.Notes, why...)
			cmdAttrs(true)
		case l.kind == "absent" || l.kind == "link" || (l.kind == "file" && a.Force):
			if l.kind == "file" {
				plan.Files = append(plan.Files, module.FileChange{Action: module.Delete, Path: a.Path, Reasons: []string{"replaced by a link (force)"}})
			}
			d.Cmds = append(d.Cmds, []string{"ln", "-sfn", "--", a.Src, a.Path})
			plan.Notes = append(plan.Notes, fmt.Sprintf("link %s -> %s (was %s %s)", a.Path, a.Src, l.kind, l.target))
			cmdAttrs(true)
		default:
			return nil, fmt.Errorf("%s exists and is a %s; set force: true to replace a file with a link", a.Path, l.kind)
		}
	}
	for _, c := range d.Cmds {
		plan.Commands = append(plan.Commands, strings.Join(c, " "))
	}
	if len(d.Cmds) > 0 {
		plan.Notes = append(plan.Notes, "not undone by a rollback: "+strings.Join(plan.Commands, "; "))
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	plan.Data = raw
	return plan, nil
}

// fileAttrPlan changes a regular file's mode or ownership by writing its
// own content back with them: atomic, backed up, undone by a rollback.
func fileAttrPlan(ctx context.Context, h transport.Reader, a *Args, mode fs.FileMode, why []string) (*module.Plan, error) {
	snap, err := h.Query(ctx, transport.Query{Files: []string{a.Path}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", a.Path, err)
	}
	f := snap.File(a.Path)
	if !f.Exists || f.IsDir {
		return nil, fmt.Errorf("%s is not a regular file", a.Path)
	}
	return &module.Plan{Files: []module.FileChange{{Action: module.Update, Path: a.Path, Before: f.Content, After: f.Content,
		BeforeHash: module.Hash(f.Content), AfterHash: module.Hash(f.Content), Mode: mode, Owner: a.Owner, Group: a.Group, Reasons: why}}}, nil
}

// Apply performs the plan: file ops first, then the commands.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	res := &module.Result{Changed: true, Files: p.Files}
	if len(p.Files) > 0 {
		if _, err := module.ApplyFiles(ctx, h, p); err != nil {
			return nil, err
		}
	}
	var d data
	if len(p.Data) > 0 {
		if err := json.Unmarshal(p.Data, &d); err != nil {
			return nil, fmt.Errorf("decode plan: %w", err)
		}
	}
	for _, c := range d.Cmds {
		out, err := h.Exec(ctx, transport.Cmd{Argv: c, Touches: []string{c[len(c)-1]}})
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", strings.Join(c, " "), err)
		}
		if !out.OK() {
			return nil, fmt.Errorf("%s exited %d: %s", strings.Join(c, " "), out.ExitCode, strings.TrimSpace(string(out.Stderr)+string(out.Stdout)))
		}
	}
	return res, nil
}
