// Package find is Ansible's `find`, one directory level deep: it lists the
// entries of each path that match patterns and file_type and hands them to
// `register:` in Ansible's shape (`files` with each entry's `path`, `mode`,
// `isdir`, `isreg`, `islnk`, `uid`, `gid`, `size`, `pw_name`, ...,
// `matched`, `examined`, `msg`, `skipped_paths`). It only reads: its plan is
// always empty, in check mode too, and its result is known when the play is
// planned.
//
// Each path is listed with one probe (GNU find -printf, one level, entries
// NUL-separated, the paths arguments, never shell text). Where an earlier
// task of the play plans to write or remove a file in a listed directory,
// find answers with that planned state, as the node will be when the task
// runs. recurse, depth, contains, age and size are refused at load, saying
// so.
package find

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"nodeconverge/engine/fnmatch"
	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/debug"
	"nodeconverge/modules/stat"
)

func init() {
	module.Register(module.Registration{Name: "find", Module: Module{}, Prefetch: Module{}.Prefetch})
}

// Args are ansible.builtin.find's arguments.
type Args struct {
	Paths    debug.StringList `yaml:"paths"`
	Path     debug.StringList `yaml:"path"`
	Name     debug.StringList `yaml:"name"`
	Patterns debug.StringList `yaml:"patterns"`
	Pattern  debug.StringList `yaml:"pattern"`
	Excludes debug.StringList `yaml:"excludes"`
	Exclude  debug.StringList `yaml:"exclude"`
	FileType string           `yaml:"file_type"`
	Hidden   bool             `yaml:"hidden"`
	Follow   bool             `yaml:"follow"`
	UseRegex bool             `yaml:"use_regex"`
	// GetChecksum and ReadWholeFile are accepted; a checksum is not
	// returned (reading one is a template error that names it).
	GetChecksum   bool `yaml:"get_checksum"`
	ReadWholeFile bool `yaml:"read_whole_file"`
	// Recurse, Depth, Contains, Age, AgeStamp and Size are refused.
	Recurse  bool   `yaml:"recurse"`
	Depth    *int   `yaml:"depth"`
	Contains string `yaml:"contains"`
	Age      string `yaml:"age"`
	AgeStamp string `yaml:"age_stamp"`
	Size     string `yaml:"size"`
}

// Validate settles the aliases and Ansible's list arguments given as one
// comma-separated string.
func (a *Args) Validate() error {
	a.Paths = splitList(append(append(a.Paths, a.Path...), a.Name...))
	a.Patterns = splitList(append(a.Patterns, a.Pattern...))
	a.Excludes = splitList(append(a.Excludes, a.Exclude...))
	a.Path, a.Name, a.Pattern, a.Exclude = nil, nil, nil, nil
	switch {
	case len(a.Paths) == 0:
		return errors.New("paths is required")
	case a.Recurse || a.Depth != nil:
		return errors.New("recurse and depth are not supported: find lists one directory level (give each directory in paths)")
	case a.Contains != "" || a.Age != "" || a.Size != "":
		return errors.New("contains, age and size are not supported: find selects by name and file_type")
	case a.AgeStamp != "" && a.AgeStamp != "mtime" && a.AgeStamp != "atime" && a.AgeStamp != "ctime":
		return fmt.Errorf("age_stamp %q: one of atime, ctime, mtime", a.AgeStamp)
	}
	switch a.FileType {
	case "file", "directory", "link", "any":
	default:
		return fmt.Errorf("file_type %q: one of any, directory, file, link", a.FileType)
	}
	for _, p := range a.Paths {
		if !path.IsAbs(p) {
			return fmt.Errorf("path %q must be an absolute path", p)
		}
	}
	if len(a.Patterns) == 0 {
		a.Patterns = debug.StringList{"*"}
		if a.UseRegex {
			a.Patterns = debug.StringList{".*"}
		}
	}
	for _, p := range append(append([]string(nil), a.Patterns...), a.Excludes...) {
		if _, err := a.matcher(p); err != nil {
			return err
		}
	}
	return nil
}

// splitList is Ansible's list type: each string item split on commas.
func splitList(in debug.StringList) debug.StringList {
	var out debug.StringList
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// matcher is one pattern as Python's fnmatch.fnmatch (or, with use_regex,
// re.match: anchored at the start only) reads it.
func (a *Args) matcher(p string) (*regexp.Regexp, error) {
	if a.UseRegex {
		r, err := regexp.Compile(`^(?:` + p + `)`)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %v (Go's RE2 has no look-around or back-references)", p, err)
		}
		return r, nil
	}
	return regexp.Compile(fnmatch.Translate(p))
}

// match is Ansible's pfilter: one of patterns matches the name and none
// of excludes does.
func (a *Args) match(name string) bool {
	for _, p := range a.Patterns {
		if r, _ := a.matcher(p); r != nil && r.MatchString(name) {
			for _, e := range a.Excludes {
				if x, _ := a.matcher(e); x != nil && x.MatchString(name) {
					return false
				}
			}
			return true
		}
	}
	return false
}

// Module implements module.Module for find.
type Module struct{}

// NewArgs returns Ansible's defaults.
func (Module) NewArgs() module.Args { return &Args{FileType: "file"} }

// probe lists each directory argument one level deep: "D PATH" then its
// entries (type, octal mode, uid, gid, size, inode, links, device, atime,
// mtime, ctime, user, group, path; NUL-terminated), or "X PATH" for a path
// that is not a directory. $1 is H (follow the argument when it is a link,
// as os.walk does) or L (follow every link).
const probe = `opt=$1; shift
for p in "$@"; do
	if [ -d "$p" ]; then
		printf 'D %s\0' "$p"
		find -"$opt" "$p" -mindepth 1 -maxdepth 1 -printf '%y %m %U %G %s %i %n %D %A@ %T@ %C@\t%u\t%g\t%p\0' || exit 1
	else
		printf 'X %s\0' "$p"
	fi
done`

func (a *Args) query() transport.Query {
	opt := "H"
	if a.Follow {
		opt = "L"
	}
	argv := append([]string{"sh", "-c", probe, "sh", opt}, a.Paths...)
	reads := make([]string, len(a.Paths))
	for i, p := range a.Paths {
		reads[i] = strings.TrimSuffix(p, "/") + "/"
	}
	return transport.Query{Cmds: []transport.Cmd{{Argv: argv, Reads: reads}}}
}

// Prefetch reads the directories with the play's other reads.
func (Module) Prefetch(margs module.Args) transport.Query { return margs.(*Args).query() }

// entry is one listed file, as the probe gave it.
type entry struct {
	kind byte
	info map[string]any
}

// Check lists the directories; the plan is empty and carries find's
// return values.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	snap, err := h.Query(ctx, a.query())
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", strings.Join(a.Paths, ", "), err)
	}
	if len(snap.Cmds) != 1 {
		return nil, fmt.Errorf("find %s: no answer", strings.Join(a.Paths, ", "))
	}
	res := snap.Cmds[0]
	if !res.OK() {
		return nil, fmt.Errorf("find %s: %s", strings.Join(a.Paths, ", "), strings.TrimSpace(string(res.Stderr)))
	}
	dirs, err := parse(string(res.Stdout))
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", strings.Join(a.Paths, ", "), err)
	}
	plan := &module.Plan{}
	files := []any{}
	skipped := map[string]any{}
	examined := 0
	for _, p := range a.Paths {
		ents, ok := dirs[p]
		if !ok {
			skipped[p] = fmt.Sprintf("'%s' is not a directory", p)
			continue
		}
		if a.planned(p, ents, snap.Files) {
			plan.Notes = append(plan.Notes, "the listing of "+p+" is as an earlier task of the play leaves it")
		}
		names := make([]string, 0, len(ents))
		for n := range ents {
			names = append(names, n)
		}
		sort.Strings(names)
		examined += len(names)
		for _, full := range names {
			e := ents[full]
			base := path.Base(full)
			if strings.HasPrefix(base, ".") && !a.Hidden {
				continue
			}
			want := a.FileType == "any" || a.FileType == "file" && e.kind == 'f' ||
				a.FileType == "directory" && e.kind == 'd' || a.FileType == "link" && e.kind == 'l'
			if want && a.match(base) {
				files = append(files, e.info)
			}
		}
	}
	msg := "All paths examined"
	if len(skipped) > 0 {
		msg = "Not all paths examined, check warnings for details"
		for _, p := range a.Paths {
			if s, ok := skipped[p]; ok {
				plan.Notes = append(plan.Notes, fmt.Sprintf("skipped %s: %s", p, s))
			}
		}
	}
	plan.Vars = map[string]any{"files": files, "matched": len(files), "examined": examined, "msg": msg, "skipped_paths": skipped}
	return plan, nil
}

// planned applies what earlier tasks of the play plan in dir (files the
// overlay reports under it, one level deep) to its live listing, and says
// whether anything did.
func (a *Args) planned(dir string, ents map[string]*entry, files map[string]*transport.FileInfo) bool {
	changed := false
	for p, f := range files {
		if path.Dir(p) != path.Clean(dir) {
			continue
		}
		changed = true
		if !f.Exists {
			delete(ents, p)
			continue
		}
		mode := uint32(f.Mode & 0o7777)
		old := ents[p]
		if f.Mode == 0 {
			mode = 0o644
			if old != nil {
				if m, err := strconv.ParseUint(old.info["mode"].(string), 8, 32); err == nil {
					mode = uint32(m)
				}
			}
		}
		info := map[string]any{"uid": 0, "gid": 0, "pw_name": "root", "gr_name": "root", "nlink": 1}
		if old != nil {
			for k, v := range old.info {
				info[k] = v
			}
		}
		if f.Owner != "" {
			info["pw_name"] = f.Owner
		}
		if f.Group != "" {
			info["gr_name"] = f.Group
		}
		info["path"], info["size"] = p, len(f.Content)
		setKind(info, 'f', mode)
		ents[p] = &entry{kind: 'f', info: info}
	}
	return changed
}

// parse reads the probe's answer: per listed directory, its entries by
// path.
func parse(out string) (map[string]map[string]*entry, error) {
	dirs := map[string]map[string]*entry{}
	var cur map[string]*entry
	for _, rec := range strings.Split(strings.TrimSuffix(out, "\x00"), "\x00") {
		switch {
		case rec == "":
		case strings.HasPrefix(rec, "D "):
			cur = map[string]*entry{}
			dirs[rec[2:]] = cur
		case strings.HasPrefix(rec, "X "):
			cur = nil
		case cur == nil:
			return nil, fmt.Errorf("unexpected entry %q", rec)
		default:
			e, err := parseEntry(rec)
			if err != nil {
				return nil, err
			}
			cur[e.info["path"].(string)] = e
		}
	}
	return dirs, nil
}

// parseEntry reads one -printf record into Ansible's statinfo.
func parseEntry(rec string) (*entry, error) {
	parts := strings.SplitN(rec, "\t", 4)
	if len(parts) != 4 {
		return nil, fmt.Errorf("unexpected entry %q", rec)
	}
	f := strings.Fields(parts[0])
	if len(f) != 11 || len(f[0]) != 1 {
		return nil, fmt.Errorf("unexpected entry %q", rec)
	}
	mode, err := strconv.ParseUint(f[1], 8, 32)
	if err != nil {
		return nil, fmt.Errorf("entry %q: mode: %w", rec, err)
	}
	num, flt := stat.Int, stat.Float
	info := map[string]any{
		"path": parts[3], "uid": num(f[2]), "gid": num(f[3]), "size": num(f[4]), "inode": num(f[5]), "nlink": num(f[6]),
		"dev": num(f[7]), "atime": flt(f[8]), "mtime": flt(f[9]), "ctime": flt(f[10]), "pw_name": parts[1], "gr_name": parts[2],
	}
	setKind(info, f[0][0], uint32(mode))
	return &entry{kind: f[0][0], info: info}, nil
}

// setKind sets Ansible's mode string, kind flags and permission flags.
func setKind(info map[string]any, kind byte, mode uint32) {
	info["mode"] = fmt.Sprintf("%04o", mode&0o7777)
	info["isdir"], info["isreg"], info["islnk"] = kind == 'd', kind == 'f', kind == 'l'
	info["ischr"], info["isblk"], info["isfifo"], info["issock"] = kind == 'c', kind == 'b', kind == 'p', kind == 's'
	stat.SetBits(info, mode)
}

// Apply is never called: the plan is always empty.
func (Module) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}
