// Package copy is the generic `copy` module: it makes one file on the node
// hold exactly the given content, mode and ownership. It exists to prove the
// engine on something simple, and it carries the product's rule in miniature:
// a `validate` command runs on a candidate in a scratch directory on the node
// (in check mode too) and a failing validation blocks the write.
package copy

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"nodeconverge/engine/inputs"
	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

func init() {
	module.Register(module.Registration{Name: "copy", Module: Module{}, Inputs: module.InputBaseDir | module.InputSearchPath, Unsupported: unsupported})
}

// unsupported are ansible.builtin.copy's arguments copy does not take.
var unsupported = map[string]string{
	"force":          "not supported: copy always makes dest hold exactly the content",
	"directory_mode": "not supported: create the directory with file (state: directory)",
	"follow":         "not supported",
	"decrypt":        "not supported",
	"local_follow":   "not supported",
	"unsafe_writes":  "not supported: every write is atomic",
	"attributes":     "not supported",
	"seuser":         "not supported", "serole": "not supported", "setype": "not supported", "selevel": "not supported",
}

// Args are the copy module's arguments, named as Ansible names them.
type Args struct {
	Dest        string  `yaml:"dest"`
	Content     *string `yaml:"content"`
	Src         string  `yaml:"src"`
	Mode        string  `yaml:"mode"`
	Owner       string  `yaml:"owner"`
	Group       string  `yaml:"group"`
	Backup      bool    `yaml:"backup"`
	ValidateCmd string  `yaml:"validate"`
	// RemoteSrc says src is a file on the node, not on the controller
	// (Ansible's remote_src): its content (and, unless mode is given, its
	// mode) is what dest must hold.
	RemoteSrc bool `yaml:"remote_src"`

	baseDir    string
	searchDirs []string
}

// SetBaseDir tells the module where relative `src` paths start: the
// playbook's directory, as in Ansible.
func (a *Args) SetBaseDir(dir string) { a.baseDir = dir }

// SetSearchPath gives the directories a relative src is looked for in,
// in order (a role's, the task file's, the playbook's): files/ of each
// first, then the directory itself, as Ansible's search path.
func (a *Args) SetSearchPath(dirs []string) { a.searchDirs = dirs }

// Find is where a relative controller file is, looked for in sub of each
// search directory and then the directory itself; the first candidate
// when none exists (its read error names it).
func Find(p, sub, baseDir string, dirs []string) string {
	if filepath.IsAbs(p) {
		return p
	}
	if len(dirs) == 0 && baseDir != "" {
		dirs = []string{baseDir}
	}
	var first string
	for _, d := range dirs {
		for _, c := range []string{filepath.Join(d, sub, p), filepath.Join(d, p)} {
			if first == "" {
				first = c
			}
			if st, err := os.Stat(c); err == nil && !st.IsDir() {
				return c
			}
		}
	}
	if first == "" {
		return p
	}
	return first
}

// Validate checks what a type cannot.
func (a *Args) Validate() error {
	switch {
	case a.Dest == "":
		return errors.New("dest is required")
	case !filepath.IsAbs(a.Dest):
		return fmt.Errorf("dest %q must be an absolute path", a.Dest)
	case a.Content == nil && a.Src == "":
		return errors.New("one of content or src is required")
	case a.Content != nil && a.Src != "":
		return errors.New("content and src are mutually exclusive")
	case a.RemoteSrc && a.Src == "":
		return errors.New("remote_src needs src, the file on the node to copy")
	case a.RemoteSrc && !filepath.IsAbs(a.Src):
		return fmt.Errorf("src %q must be an absolute path on the node (remote_src)", a.Src)
	case a.ValidateCmd != "" && !strings.Contains(a.ValidateCmd, "%s"):
		return fmt.Errorf("validate %q must contain %%s (the candidate file's path)", a.ValidateCmd)
	}
	if a.Mode != "" {
		if _, err := ParseMode(a.Mode); err != nil {
			return err
		}
	}
	return nil
}

// ParseMode reads an octal file mode such as "0644" or "644", or a symbolic
// one that sets every class with "=" ("u=rw,g=r,o=r", "a=r,u+w" is not):
// such a mode is the same whatever the file's mode was, as Ansible applies
// it (u= also clears setuid, g= setgid, o= the sticky bit). A relative
// symbolic mode ("u+x", "go-w") depends on the file's current mode and is
// refused rather than guessed.
func ParseMode(s string) (fs.FileMode, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err == nil && v <= 07777 {
		return fs.FileMode(v), nil
	}
	if m, ok := symbolicMode(s); ok {
		return m, nil
	}
	return 0, fmt.Errorf("mode %q is not an octal mode such as \"0644\", nor a symbolic one that sets u, g and o with = (\"u=rw,g=r,o=r\")", s)
}

// symbolicMode reads a comma-separated list of WHO=PERMS clauses (WHO of
// u, g, o, a; PERMS of r, w, x) that together set all three classes.
func symbolicMode(s string) (fs.FileMode, bool) {
	shift := map[rune]uint{'u': 6, 'g': 3, 'o': 0}
	var mode fs.FileMode
	set := map[rune]bool{}
	for _, clause := range strings.Split(s, ",") {
		who, perms, ok := strings.Cut(clause, "=")
		if !ok || who == "" || strings.ContainsAny(perms, "=+-") {
			return 0, false
		}
		var bits fs.FileMode
		for _, p := range perms {
			switch p {
			case 'r':
				bits |= 4
			case 'w':
				bits |= 2
			case 'x':
				bits |= 1
			default:
				return 0, false
			}
		}
		for _, w := range who {
			classes := []rune{w}
			if w == 'a' {
				classes = []rune{'u', 'g', 'o'}
			} else if _, known := shift[w]; !known {
				return 0, false
			}
			for _, c := range classes {
				mode = mode&^(7<<shift[c]) | bits<<shift[c]
				set[c] = true
			}
		}
	}
	return mode, set['u'] && set['g'] && set['o']
}

// Module implements module.Module for copy.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

func (a *Args) content() ([]byte, error) {
	if a.Content != nil {
		return []byte(*a.Content), nil
	}
	p := Find(a.Src, "files", a.baseDir, a.searchDirs)
	b, err := inputs.ReadFile(p, "copy src", inputs.MaxCopySrc)
	if err != nil {
		return nil, fmt.Errorf("read src %s: %w", p, err)
	}
	return b, nil
}

// Check compares the live file with the wanted one and validates the
// candidate when it would change.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	q := transport.Query{Files: []string{a.Dest}}
	if a.RemoteSrc {
		q.Files = append(q.Files, a.Src)
	}
	snap, err := h.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", a.Dest, err)
	}
	var want []byte
	var srcMode fs.FileMode
	if a.RemoteSrc {
		src := snap.File(a.Src)
		switch {
		case !src.Exists:
			return nil, fmt.Errorf("Source %s not found", a.Src)
		case src.IsDir:
			return nil, fmt.Errorf("src %s is a directory: remote_src copies one file here; give each file its own task", a.Src)
		}
		want, srcMode = src.Content, src.Mode&07777
		if want == nil {
			want = []byte{}
		}
	} else if want, err = a.content(); err != nil {
		return nil, err
	}
	live := snap.File(a.Dest)
	if live.IsDir {
		return nil, fmt.Errorf("dest %s is a directory", a.Dest)
	}
	fc := module.FileChange{Path: a.Dest, After: want, AfterHash: module.Hash(want), Owner: a.Owner, Group: a.Group}
	if a.Mode != "" {
		if fc.Mode, err = ParseMode(a.Mode); err != nil {
			return nil, err
		}
	}
	if a.RemoteSrc && fc.Mode == 0 && (!live.Exists || string(live.Content) != string(want)) {
		// Ansible copies src's permission bits with its content.
		fc.Mode = srcMode
	}
	if !live.Exists {
		fc.Action = module.Create
		if fc.Mode == 0 {
			fc.Mode = 0o644
		}
	} else {
		fc.Before = live.Content
		fc.BeforeHash = module.Hash(live.Content)
		fc.Action = module.Update
		if string(live.Content) != string(want) {
			fc.Reasons = append(fc.Reasons, "content")
		}
		if fc.Mode != 0 && live.Mode.Perm()|live.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != fc.Mode {
			fc.Reasons = append(fc.Reasons, fmt.Sprintf("mode %04o -> %04o", live.Mode&07777, fc.Mode))
		}
		if a.Owner != "" && a.Owner != live.Owner && a.Owner != strconv.Itoa(live.UID) {
			fc.Reasons = append(fc.Reasons, fmt.Sprintf("owner %s -> %s", live.Owner, a.Owner))
		}
		if a.Group != "" && a.Group != live.Group && a.Group != strconv.Itoa(live.GID) {
			fc.Reasons = append(fc.Reasons, fmt.Sprintf("group %s -> %s", live.Group, a.Group))
		}
		if len(fc.Reasons) == 0 {
			return &module.Plan{Vars: resultVars(a.Dest, want)}, nil
		}
	}
	plan := &module.Plan{Files: []module.FileChange{fc}, Vars: resultVars(a.Dest, want)}
	if a.ValidateCmd != "" && (fc.Action == module.Create || string(live.Content) != string(want)) {
		ev, err := ValidateCandidate(ctx, h, a.ValidateCmd, a.Dest, want)
		if err != nil {
			return nil, err
		}
		plan.Evidence = append(plan.Evidence, ev)
		if !ev.OK {
			return nil, &module.ValidationError{
				Msg:      fmt.Sprintf("validate %q failed on the candidate for %s; the live file is unchanged:\n%s", a.ValidateCmd, a.Dest, ev.Output),
				Evidence: plan.Evidence,
			}
		}
	}
	if a.Backup && live.Exists && string(live.Content) != string(want) {
		plan.Files = append(plan.Files, BackupChange(a.Dest, live.Content, live.Mode&07777))
	}
	return plan, nil
}

// BackupChange is the plan's copy of dest's old content beside it, for
// Ansible's `backup: true`. It is named by the old content's hash, not a
// timestamp (Ansible's dest.PID.DATE@TIME~), so check and apply agree on
// the path and a repeated run never piles up copies.
func BackupChange(dest string, old []byte, mode fs.FileMode) module.FileChange {
	h := module.Hash(old)
	return module.FileChange{
		Action: module.Create, Path: dest + "." + h[:12] + "~",
		After: old, AfterHash: h, Mode: mode,
		Reasons: []string{"backup of " + dest},
	}
}

// ValidateCandidate runs a `validate: "cmd %s"` command on a candidate
// for dest, staged in a scratch directory on the node under dest's own
// base name (tools such as `visudo` or `containerd` care about the
// extension); the live file is not touched.
func ValidateCandidate(ctx context.Context, h transport.Reader, cmd, dest string, want []byte) (module.Evidence, error) {
	rel := "candidate/" + filepath.Base(dest)
	script := strings.ReplaceAll(cmd, "%s", `"$SCRATCH/`+rel+`"`)
	res, err := h.Stage(ctx, transport.StageRequest{
		Files: map[string]transport.StagedFile{rel: {Content: want, Mode: 0o600}},
		Cmds:  []transport.Cmd{{Script: script}},
	})
	if err != nil {
		return module.Evidence{}, fmt.Errorf("validate %s: %w", dest, err)
	}
	if len(res) != 1 {
		return module.Evidence{}, fmt.Errorf("validate %s: got %d results for 1 command", dest, len(res))
	}
	out := strings.TrimSpace(string(res[0].Stderr) + string(res[0].Stdout))
	return module.Evidence{What: "validate candidate " + dest, Command: cmd, OK: res[0].OK(), Output: out, Required: true}, nil
}

// Apply writes the file atomically.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	var ops []transport.Op
	for _, fc := range p.Files {
		ops = append(ops, transport.Op{Kind: transport.OpWrite, Path: fc.Path, Content: fc.After, Mode: fc.Mode, Owner: fc.Owner, Group: fc.Group, Backup: true})
	}
	if _, err := h.Apply(ctx, ops); err != nil {
		return nil, err
	}
	return &module.Result{Changed: len(ops) > 0, Files: p.Files}, nil
}

// resultVars are the registered values Ansible's copy and template return
// whether or not they changed the file (a handler looping over a
// template's results reads `item.dest`): dest, the content's sha1
// checksum, its size and state file.
func resultVars(dest string, content []byte) map[string]any {
	sum := sha1.Sum(content)
	return map[string]any{"dest": dest, "checksum": hex.EncodeToString(sum[:]), "size": len(content), "state": "file"}
}
