// Package edit is what Ansible's line-level file modules (lineinfile,
// blockinfile, replace) share: the file they own lines of, read in one
// round trip, the new content computed in Go by the module, then one plan
// that carries the whole candidate. The candidate is validated on the node
// before anything live changes (`validate: "cmd %s"`), written atomically
// with a backup the run can roll back to, and its mode and ownership
// converged as Ansible's file attributes are. Check mode and --diff see
// the same plan.
//
// It also holds the two places where Python's `re` and Go's RE2 differ in
// what these modules need: Regexp compiles a Python pattern (refusing, with
// the reason, what RE2 cannot run), and Expand fills a Python replacement
// template (\1, \g<name>) from a match.
package edit

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/copy"
)

// Target is the file an edit owns lines of, with Ansible's names: path
// and its aliases dest, destfile and name, the file attributes (mode,
// owner, group), backup and validate.
type Target struct {
	Path     string `yaml:"path"`
	Dest     string `yaml:"dest"`
	Destfile string `yaml:"destfile"`
	Name     string `yaml:"name"`
	Mode     string `yaml:"mode"`
	Owner    string `yaml:"owner"`
	Group    string `yaml:"group"`
	Backup   bool   `yaml:"backup"`
	Validate string `yaml:"validate"`
	// UnsafeWrites is accepted for Ansible's sake: every write here is
	// atomic anyway.
	UnsafeWrites bool `yaml:"unsafe_writes"`
}

// Resolve settles the aliases and checks what a type cannot.
func (t *Target) Resolve() error {
	n := 0
	for _, p := range []string{t.Path, t.Dest, t.Destfile, t.Name} {
		if p != "" {
			n++
			t.Path = p
		}
	}
	t.Dest, t.Destfile, t.Name = "", "", ""
	switch {
	case n == 0:
		return errors.New("path is required")
	case n > 1:
		return errors.New("give path once (dest, destfile and name are its aliases)")
	case !path.IsAbs(t.Path):
		return fmt.Errorf("path %q must be an absolute path", t.Path)
	}
	t.Path = path.Clean(t.Path)
	if t.Validate != "" && !strings.Contains(t.Validate, "%s") {
		return fmt.Errorf("validate must contain %%s: %s", t.Validate)
	}
	if t.Mode != "" {
		if _, err := copy.ParseMode(t.Mode); err != nil {
			return err
		}
	}
	return nil
}

// Outcome is what a module's edit decided: the new content (nil: no file,
// which is only possible when there was none), Ansible's message for a
// content change ("line added"), and the module's own return values.
type Outcome struct {
	After []byte
	Msg   string
	Vars  map[string]any
}

// Live is the file as the node (or the plan so far) has it.
type Live struct {
	Content []byte
	Exists  bool
}

// Func computes an edit from the live file. An error fails the task with
// Ansible's message ("Destination ... does not exist !").
type Func func(live Live) (Outcome, error)

// BackupKey is the return value that names the backup ("backup" for
// lineinfile, "backup_file" for blockinfile and replace, as in Ansible).
type BackupKey string

// Plan reads the target, runs the edit and plans the whole candidate:
// content, mode and ownership, its validation and its backup.
func Plan(ctx context.Context, h transport.Reader, t *Target, key BackupKey, edit Func) (*module.Plan, error) {
	snap, err := h.Query(ctx, transport.Query{Files: []string{t.Path}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.Path, err)
	}
	live := snap.File(t.Path)
	if live.IsDir {
		return nil, fmt.Errorf("Path %s is a directory !", t.Path)
	}
	out, err := edit(Live{Content: live.Content, Exists: live.Exists})
	if err != nil {
		return nil, err
	}
	vars := map[string]any{}
	for k, v := range out.Vars {
		vars[k] = v
	}
	msg := out.Msg
	if out.After == nil && !live.Exists {
		vars["msg"] = msg
		return &module.Plan{Vars: vars}, nil
	}
	after := out.After
	if after == nil {
		after = []byte{}
	}
	contentChanged := !live.Exists || string(live.Content) != string(after)
	fc := module.FileChange{Path: t.Path, After: after, AfterHash: module.Hash(after), Owner: t.Owner, Group: t.Group}
	if t.Mode != "" {
		fc.Mode, _ = copy.ParseMode(t.Mode)
	}
	var attrs []string
	if live.Exists {
		fc.Action, fc.Before, fc.BeforeHash = module.Update, live.Content, module.Hash(live.Content)
		if contentChanged {
			fc.Reasons = append(fc.Reasons, "content")
		}
		if fc.Mode != 0 && live.Mode&07777 != fc.Mode {
			attrs = append(attrs, fmt.Sprintf("mode %04o -> %04o", live.Mode&07777, fc.Mode))
		}
		if t.Owner != "" && t.Owner != live.Owner && t.Owner != strconv.Itoa(live.UID) {
			attrs = append(attrs, fmt.Sprintf("owner %s -> %s", live.Owner, t.Owner))
		}
		if t.Group != "" && t.Group != live.Group && t.Group != strconv.Itoa(live.GID) {
			attrs = append(attrs, fmt.Sprintf("group %s -> %s", live.Group, t.Group))
		}
		fc.Reasons = append(fc.Reasons, attrs...)
	} else {
		fc.Action = module.Create
		if fc.Mode == 0 {
			fc.Mode = 0o644
		}
	}
	if !contentChanged && len(attrs) == 0 {
		vars["msg"] = msg
		return &module.Plan{Vars: vars}, nil
	}
	if len(attrs) > 0 {
		// Ansible's words, so a registered msg reads the same.
		if contentChanged && msg != "" {
			msg += " and "
		}
		msg += "ownership, perms or SE linux context changed"
	}
	vars["msg"] = msg
	plan := &module.Plan{Files: []module.FileChange{fc}, Vars: vars}
	if t.Validate != "" && contentChanged {
		ev, err := copy.ValidateCandidate(ctx, h, t.Validate, t.Path, after)
		if err != nil {
			return nil, err
		}
		plan.Evidence = append(plan.Evidence, ev)
		if !ev.OK {
			return nil, &module.ValidationError{
				Msg:      fmt.Sprintf("failed to validate: %s on the candidate for %s; the live file is unchanged:\n%s", t.Validate, t.Path, ev.Output),
				Evidence: plan.Evidence,
			}
		}
	}
	if t.Backup && live.Exists && contentChanged {
		b := copy.BackupChange(t.Path, live.Content, live.Mode&07777)
		plan.Files = append(plan.Files, b)
		vars[string(key)] = b.Path
	} else if key == "backup" {
		vars["backup"] = ""
	}
	return plan, nil
}
