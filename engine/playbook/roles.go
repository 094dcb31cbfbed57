package playbook

import (
	"encoding/json"
	"fmt"
	"nodeconverge/engine/jinja"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/inputs"
	"nodeconverge/engine/yamlx"
)

// Roles, task files and blocks are expanded at load, as Ansible expands
// what it calls static: a play's `roles:` (each role's meta/main.yml
// dependencies first, then its tasks/main.yml), `import_role`,
// `include_role` and `include_tasks` without a loop, `import_tasks`, and
// `block:` become the play's task list, each task keeping the file, line
// and column it was written at (so --syntax-check names a role's file).
// What the entry says (when, tags, become, vars) is inherited by every
// task it brings in. A role's defaults/main.yml, vars/main.yml and params
// are the variables of its tasks at Ansible's precedence (Role); its
// templates/ and files/ are where its template and copy tasks find src.

// Role is one use of a role in a play: its directory and its variables.
type Role struct {
	Name string
	Path string
	// Defaults are defaults/main.yml, below the inventory; Vars are
	// vars/main.yml, above the play's vars; Params are the role entry's
	// parameters (and its vars:), above registered results.
	Defaults, Vars, Params map[string]any
}

// Layers are the role's variables for a task, nil maps for a task of no
// role: defaults (lowest), vars (above the play's), params (above what
// earlier tasks registered).
func (t *Task) Layers() (defaults, vars, params map[string]any) {
	if t.Role == nil {
		return nil, nil, nil
	}
	return t.Role.Defaults, t.Role.Vars, t.Role.Params
}

// DisplayName is the task's name as ansible-playbook lists it: a role's
// named task as "role : name", an unnamed task by its module alone.
func (t *Task) DisplayName() string {
	if t.Name == "" {
		// Ansible names an unnamed task by its action alone.
		return t.Module
	}
	if t.Role != nil {
		return t.Role.Name + " : " + t.Name
	}
	return t.Name
}

// inherit is what an entry that brings tasks in (a role, an import, a
// block) gives each of them.
type inherit struct {
	when   []*Cond
	tags   []string
	become *bool
	// checkMode is the entry's check_mode:.
	checkMode *bool
	vars      map[string]any
	role      *Role
	env       *yaml.Node
}

func (in inherit) apply(ts []*Task) {
	for _, t := range ts {
		if len(in.when) > 0 && !t.Handler {
			t.When = append(append([]*Cond{}, in.when...), t.When...)
		}
		if len(in.tags) > 0 && !t.Handler {
			t.Tags = dedupeStrings(append(append([]string{}, in.tags...), t.Tags...))
		}
		if t.Become == nil && in.become != nil {
			b := *in.become
			t.Become = &b
		}
		if t.CheckMode == nil && in.checkMode != nil {
			b := *in.checkMode
			t.CheckMode = &b
		}
		if len(in.vars) > 0 {
			t.Vars = MergeVars(in.vars, t.Vars)
		}
		if t.Role == nil {
			t.Role = in.role
		}
		if in.env != nil {
			t.Environment = append([]*yaml.Node{in.env}, t.Environment...)
		}
	}
}

// includeKeys are the task keys that bring other tasks in.
var includeKeys = map[string]string{
	"import_tasks": "import_tasks", "include_tasks": "include_tasks", "import_role": "import_role",
	"include_role": "include_role", "block": "block", "include": "include_tasks",
}

// includeKind says whether the task mapping v brings tasks in, and how.
func includeKind(v *yaml.Node) (kind string, key *yaml.Node, val *yaml.Node) {
	for i := 0; i+1 < len(v.Content); i += 2 {
		k := yamlx.Deref(v.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode {
			continue
		}
		name := strings.TrimPrefix(k.Value, fqcnPrefix)
		if kind, ok := includeKeys[name]; ok {
			return kind, k, v.Content[i+1]
		}
	}
	return "", nil, nil
}

// included reads a task that brings others in; nil when it has problems
// (recorded).
func (l *loader) included(v *yaml.Node, handler bool, kind string, key, val *yaml.Node) []*Task {
	var in inherit
	var name string
	var ownTags []string
	// rescue and always are a block's other sections.
	var rescue, always *yaml.Node
	// loopNode is an include's loop,
	// loopVar and indexVar its loop_control's names.
	var loopNode *yaml.Node
	var loopVar, indexVar string
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := yamlx.Deref(v.Content[i]), v.Content[i+1]
		if k == key || k == nil {
			continue
		}
		var err error
		switch k.Value {
		case "name":
			// The include's own name is not a task of its own; --list-tasks
			// shows it for a dynamic include (Task.IncludedBy).
			name, err = l.str(x, "name")
		case "when":
			in.when, err = l.conds(x, "when")
		case "tags":
			in.tags, _, err = l.stringList(x, "tags", true)
			ownTags = append([]string(nil), in.tags...)
		case "become":
			var b bool
			if b, err = l.boolean(x, "become"); err == nil {
				in.become = &b
			}
		case "no_log":
			_, err = l.noLog(x)
		case "check_mode":
			var b bool
			if b, err = l.boolean(x, "check_mode"); err == nil {
				in.checkMode = &b
			}
		case "environment":
			err = l.checkEnvironment(nil, x)
			in.env = x
		case "ignore_errors":
			err = nodeErr(l.file, k, "ignore_errors on %s: not supported: put it on the tasks", kind)
		case "become_user":
			var u string
			if u, err = l.str(x, "become_user"); err == nil && u != "root" {
				err = nodeErr(l.file, x, "become_user: %q: a task becomes root or no one (nodeconverge runs a host's tasks over one connection)", u)
			}
		case "vars":
			in.vars, err = l.vars(x)
		case "rescue", "always":
			switch {
			case kind != "block":
				err = nodeErr(l.file, k, "%s: only a block takes it (block: with its tasks, then %s:)", k.Value, k.Value)
			case handler:
				err = nodeErr(l.file, k, "%s in a handler's block: not supported: a failed handler fails its host; write the handler's tasks without it", k.Value)
			case k.Value == "rescue":
				rescue = x
			default:
				always = x
			}
		case "apply":
			if kind != "include_tasks" && kind != "include_role" {
				err = nodeErr(l.file, k, "apply: only include_tasks and include_role take it")
				break
			}
			var ap inherit
			ap, err = l.applyKeywords(x)
			in.when = append(in.when, ap.when...)
			in.tags = append(in.tags, ap.tags...)
			if ap.become != nil {
				in.become = ap.become
			}
		case "loop", "with_items":
			if kind != "include_tasks" && kind != "include_role" {
				err = nodeErr(l.file, k, "%s on %s: not supported: only include_tasks and include_role loop", k.Value, kind)
				break
			}
			loopNode = x
		case "loop_control":
			if kind != "include_tasks" && kind != "include_role" {
				err = nodeErr(l.file, k, "loop_control on %s: not supported: only include_tasks and include_role loop", kind)
				break
			}
			var lc Task
			if err = l.loopControl(&lc, x); err == nil {
				loopVar, indexVar = lc.loopVar, lc.indexVar
			}
		default:
			if hint, ok := taskKeywordHints[k.Value]; ok {
				err = nodeErr(l.file, k, "task keyword %q is %s", k.Value, hint)
			} else {
				err = nodeErr(l.file, k, "unknown key %q on %s", k.Value, kind)
			}
		}
		l.add(err)
	}
	var items []any
	if loopNode != nil {
		var err error
		if items, err = l.includeItems(loopNode, kind); err != nil {
			l.add(err)
			return nil
		}
		if loopVar == "" {
			loopVar = "item"
		}
	} else if loopVar != "" || indexVar != "" {
		l.add(nodeErr(l.file, v, "loop_control without a loop on %s", kind))
	}
	// perItem gives each item's tasks the item (and its index) as
	// variables: Ansible's include loop, expanded at load.
	perItem := func(i int, ts []*Task) {
		vars := map[string]any{loopVar: items[i]}
		if indexVar != "" {
			vars[indexVar] = i
		}
		inherit{vars: vars}.apply(ts)
	}
	raw := strings.TrimPrefix(key.Value, fqcnPrefix)
	dynamic := !handler && (raw == "include_tasks" || raw == "include_role" || raw == "include")
	mark := func(ts []*Task) []*Task {
		if !dynamic {
			return ts
		}
		return append([]*Task{l.marker(key, kind, name, handler)}, ts...)
	}
	var out []*Task
	switch kind {
	case "block":
		if rescue == nil && always == nil {
			out = l.tasks(val, handler)
			break
		}
		b := &Block{Pos: posOf(l.file, v), Parent: l.blk, Within: l.sec}
		saved, savedSec := l.blk, l.sec
		l.blk = b
		for _, part := range []struct {
			n   *yaml.Node
			sec Section
		}{{val, InBlock}, {rescue, InRescue}, {always, InAlways}} {
			l.sec = part.sec
			out = append(out, l.tasks(part.n, handler)...)
		}
		l.blk, l.sec = saved, savedSec
	case "import_tasks", "include_tasks":
		file, err := l.str(val, kind)
		if m := yamlx.Deref(val); m != nil && m.Kind == yaml.MappingNode {
			file, err = l.fileArg(m, kind)
		}
		if err != nil {
			l.add(err)
			return nil
		}
		switch {
		case items != nil:
			for i, it := range items {
				name, err := l.itemName(file, loopVar, indexVar, it, i, val, kind)
				if err != nil {
					l.add(err)
					return nil
				}
				p, err := l.findTaskFile(name, val)
				if err != nil {
					l.add(err)
					return nil
				}
				ts := mark(l.taskFile(p, handler, val))
				perItem(i, ts)
				out = append(out, ts...)
			}
		case strings.Contains(file, "{{") && kind == "include_tasks":
			out = l.templatedInclude(file, handler, val)
		case strings.Contains(file, "{{"):
			l.add(nodeErr(l.file, val, "%s: %q: a templated file name is not supported: import_tasks is read at load; use include_tasks", kind, file))
			return nil
		default:
			p, err := l.findTaskFile(file, val)
			if err != nil {
				l.add(err)
				return nil
			}
			out = mark(l.taskFile(p, handler, val))
		}
	case "import_role", "include_role":
		ref, err := l.roleArgs(val, kind)
		if err != nil {
			l.add(err)
			return nil
		}
		if items == nil {
			ts, hs := l.role(ref, val)
			out = mark(ts)
			l.extraHandlers = append(l.extraHandlers, hs...)
			break
		}
		for i, it := range items {
			// Each item is a use of the role with its own params, so
			// it runs once per item, as Ansible's include_role loop.
			r := *ref
			r.params = MergeVars(ref.params, map[string]any{loopVar: it})
			ts, hs := l.role(&r, val)
			ts = mark(ts)
			perItem(i, ts)
			out = append(out, ts...)
			l.extraHandlers = append(l.extraHandlers, hs...)
		}
	}
	in.apply(out)
	if dynamic && len(in.when) > 0 {
		// The include's when: decides its marker; the tasks it brings
		// in are not the host's where it is false (Ansible never reads
		// them there): quiet.
		for _, t := range out {
			if t.Meta == "include" || t.Meta == "include_role" || t.standsForInclude || len(t.When) < len(in.when) {
				continue
			}
			for k := range in.when {
				q := *t.When[k]
				q.Quiet = true
				t.When[k] = &q
			}
		}
	}
	if raw == "include_tasks" || raw == "include_role" || raw == "include" {
		inc := &Include{Name: key.Value, Tags: ownTags}
		if name != "" {
			inc.Name = name
			if l.curRole != nil {
				inc.Name = l.curRole.Name + " : " + name
			}
		}
		// The outermost include is the one Ansible lists: an outer
		// include runs this after its inner ones and takes their tasks.
		for _, t := range out {
			t.IncludedBy = inc
		}
	}
	if in.env != nil {
		for _, t := range out {
			l.envNames(t, in.env)
		}
	}
	return out
}

// marker is the task that stands for a dynamic include itself on a host
// (Task.Meta "include" for include_tasks, "include_role"): Ansible counts
// an include_tasks that runs as ok (once per file and item) and an
// include that its when: skips as skipped, and reads none of the tasks
// of an include that does not run.
func (l *loader) marker(key *yaml.Node, kind, name string, handler bool) *Task {
	meta := "include"
	if kind == "include_role" {
		meta = "include_role"
	}
	return &Task{Pos: posOf(l.file, key), Name: name, Module: key.Value, Meta: meta, Handler: handler, Block: l.blk, Section: l.sec, searchDirs: l.searchDirs(), Role: l.curRole}
}

// applyKeywords reads include_tasks' apply: the keywords its tasks get.
func (l *loader) applyKeywords(n *yaml.Node) (inherit, error) {
	var in inherit
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.MappingNode {
		return in, nodeErr(l.file, n, "apply must be a mapping of task keywords")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := yamlx.Deref(v.Content[i]), v.Content[i+1]
		var err error
		switch k.Value {
		case "tags":
			in.tags, _, err = l.stringList(x, "tags", true)
		case "when":
			in.when, err = l.conds(x, "when")
		case "become":
			var b bool
			if b, err = l.boolean(x, "become"); err == nil {
				in.become = &b
			}
		default:
			err = nodeErr(l.file, k, "apply: %q is not supported (tags, when, become are)", k.Value)
		}
		if err != nil {
			return in, err
		}
	}
	return in, nil
}

// fileArg reads the file: of an include given as a mapping.
func (l *loader) fileArg(m *yaml.Node, kind string) (string, error) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := yamlx.Deref(m.Content[i])
		if k != nil && k.Value == "file" {
			return l.str(m.Content[i+1], kind+" file")
		}
	}
	return "", nodeErr(l.file, m, "%s: give the file to read (file: NAME)", kind)
}

// findTaskFile finds an included task file as Ansible does: beside the
// file that includes it, in the role's tasks/, beside the playbook.
func (l *loader) findTaskFile(name string, at *yaml.Node) (string, error) {
	if filepath.IsAbs(name) {
		return name, nil
	}
	var dirs []string
	dirs = append(dirs, filepath.Dir(l.file))
	if l.curRole != nil {
		dirs = append(dirs, filepath.Join(l.curRole.Path, "tasks"), l.curRole.Path)
	}
	dirs = append(dirs, l.playDir)
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", nodeErr(l.file, at, "task file %q not found (looked in %s)", name, strings.Join(dirs, ", "))
}

// maxIncludeDepth bounds files including files (and roles depending on
// roles): a loop of includes is an error, not a hang.
const maxIncludeDepth = 30

// taskFile loads the tasks (or handlers) of one file, errors at its own
// lines.
func (l *loader) taskFile(p string, handler bool, at *yaml.Node) []*Task {
	if l.depth >= maxIncludeDepth {
		l.add(nodeErr(l.file, at, "%s: files include each other more than %d deep (a loop?)", p, maxIncludeDepth))
		return nil
	}
	data, err := inputs.ReadFile(p, "task file", inputs.MaxPlaybook)
	if err != nil {
		l.add(nodeErr(l.file, at, "read %s: %v", p, err))
		return nil
	}
	doc, err := parseYAML(p, data)
	if err != nil {
		l.add(err)
		return nil
	}
	saved := l.file
	l.file = p
	l.depth++
	defer func() { l.file = saved; l.depth-- }()
	if len(doc.Content) == 0 {
		return nil
	}
	return l.tasks(doc.Content[0], handler)
}

// roleRef is a role as an entry names it.
type roleRef struct {
	name     string
	params   map[string]any
	in       inherit
	tasks    string // tasks_from, "main" by default
	vars     string
	defaults string
	handlers string
	public   bool
}

// roleEntry reads one item of a play's roles: (or a dependency of a
// role's meta/main.yml).
func (l *loader) roleEntry(n *yaml.Node) (*roleRef, error) {
	v := yamlx.Deref(n)
	if v != nil && v.Kind == yaml.ScalarNode && !yamlx.IsNull(v) {
		return &roleRef{name: v.Value, params: map[string]any{}}, nil
	}
	if v == nil || v.Kind != yaml.MappingNode {
		return nil, nodeErr(l.file, n, "a role entry must be a role name or a mapping with role:, got %s", yamlx.KindName(v))
	}
	ref := &roleRef{params: map[string]any{}}
	var problems []error
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := yamlx.Deref(v.Content[i]), v.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			problems = append(problems, nodeErr(l.file, v.Content[i], "key must be a string"))
			continue
		}
		var err error
		switch k.Value {
		case "role", "name":
			ref.name, err = l.str(x, "role")
		case "when":
			ref.in.when, err = l.conds(x, "when")
		case "tags":
			ref.in.tags, _, err = l.stringList(x, "tags", true)
		case "become":
			var b bool
			if b, err = l.boolean(x, "become"); err == nil {
				ref.in.become = &b
			}
		case "become_user":
			var u string
			if u, err = l.str(x, "become_user"); err == nil && u != "root" {
				err = nodeErr(l.file, x, "become_user: %q: a task becomes root or no one (nodeconverge runs a host's tasks over one connection)", u)
			}
		case "environment":
			if err = l.checkEnvironment(nil, x); err == nil {
				ref.in.env = x
			}
		case "vars":
			var m map[string]any
			if m, err = l.vars(x); err == nil {
				for mk, mv := range m {
					ref.params[mk] = mv
				}
			}
		default:
			if hint, ok := taskKeywordHints[k.Value]; ok {
				err = nodeErr(l.file, k, "keyword %q on a role is %s", k.Value, hint)
				break
			}
			if !varNameRe.MatchString(k.Value) {
				err = nodeErr(l.file, k, "role parameter %q is not a variable name", k.Value)
				break
			}
			var val any
			if val, err = decodeValue(l.file, x); err == nil {
				ref.params[k.Value] = val
			}
		}
		if err != nil {
			problems = append(problems, err)
		}
	}
	if ref.name == "" && len(problems) == 0 {
		problems = append(problems, nodeErr(l.file, n, "a role entry needs role: NAME"))
	}
	if len(problems) > 0 {
		for _, e := range problems[1:] {
			l.add(e)
		}
		return nil, problems[0]
	}
	return ref, nil
}

// roleArgs reads import_role's and include_role's arguments.
func (l *loader) roleArgs(n *yaml.Node, kind string) (*roleRef, error) {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.MappingNode {
		return nil, nodeErr(l.file, n, "%s must be a mapping with name:", kind)
	}
	ref := &roleRef{params: map[string]any{}}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := yamlx.Deref(v.Content[i]), v.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			return nil, nodeErr(l.file, v.Content[i], "key must be a string")
		}
		var err error
		switch k.Value {
		case "name":
			ref.name, err = l.str(x, "name")
		case "tasks_from":
			ref.tasks, err = l.str(x, "tasks_from")
		case "vars_from":
			ref.vars, err = l.str(x, "vars_from")
		case "defaults_from":
			ref.defaults, err = l.str(x, "defaults_from")
		case "handlers_from":
			ref.handlers, err = l.str(x, "handlers_from")
		case "public":
			ref.public, err = l.boolean(x, "public")
		case "allow_duplicates", "rolespec_validate":
			_, err = l.boolean(x, k.Value)
		default:
			err = nodeErr(l.file, k, "%s: unknown argument %q (name, tasks_from, vars_from, defaults_from, handlers_from, public)", kind, k.Value)
		}
		if err != nil {
			return nil, err
		}
	}
	if ref.name == "" {
		return nil, nodeErr(l.file, n, "%s needs name: ROLE", kind)
	}
	for _, s := range []string{ref.name, ref.tasks, ref.vars, ref.defaults, ref.handlers} {
		if strings.Contains(s, "{{") {
			return nil, nodeErr(l.file, n, "%s: %q: a templated name is not supported: nodeconverge reads roles at load", kind, s)
		}
	}
	return ref, nil
}

// rolesOf reads a play's roles: in order, each role's dependencies first.
func (l *loader) rolesOf(n *yaml.Node) (tasks, handlers []*Task) {
	v := yamlx.Deref(n)
	if yamlx.IsNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		l.add(nodeErr(l.file, n, "roles must be a list of roles, got %s", yamlx.KindName(v)))
		return nil, nil
	}
	for _, it := range v.Content {
		ref, err := l.roleEntry(it)
		if err != nil {
			l.add(err)
			continue
		}
		ts, hs := l.role(ref, it)
		tasks = append(tasks, ts...)
		handlers = append(handlers, hs...)
	}
	return tasks, handlers
}

// findRole finds a role's directory as Ansible does: a path as given,
// roles/ beside the playbook, the roles_path (ansible.cfg,
// ANSIBLE_ROLES_PATH), beside the playbook.
func (l *loader) findRole(name string, at *yaml.Node) (string, error) {
	var cands []string
	if filepath.IsAbs(name) {
		cands = []string{name}
	} else {
		cands = append(cands, filepath.Join(l.playDir, "roles", name))
		if l.curRole != nil {
			// A dependency may sit beside the role that needs it.
			cands = append(cands, filepath.Join(filepath.Dir(l.curRole.Path), name))
		}
		for _, d := range l.rolesPath {
			cands = append(cands, filepath.Join(d, name))
		}
		cands = append(cands, filepath.Join(l.playDir, name))
	}
	cands = dedupeStrings(cands)
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return c, nil
		}
	}
	hint := ""
	if strings.Count(name, ".") >= 2 && !strings.Contains(name, "/") {
		hint = "; collections are not installed by nodeconverge: put the role's directory on roles_path"
	}
	return "", nodeErr(l.file, at, "role %q not found (looked in %s)%s", name, strings.Join(cands, ", "), hint)
}

// mainFile is dir/base with the extensions Ansible tries; "" when none.
func mainFile(dir, base string) string {
	if base == "" {
		base = "main"
	}
	for _, ext := range []string{"", ".yml", ".yaml", ".json"} {
		p := filepath.Join(dir, base+ext)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// varsFile reads a role's defaults or vars file (a mapping); nil when it
// has none.
func (l *loader) varsFile(p string) map[string]any {
	if p == "" {
		return nil
	}
	data, err := inputs.ReadFile(p, "vars file", inputs.MaxVarsFile)
	if err != nil {
		l.add(&Error{Pos: Pos{File: p, Line: 1, Col: 1}, Msg: err.Error()})
		return nil
	}
	doc, err := parseYAML(p, data)
	if err != nil {
		l.add(err)
		return nil
	}
	if len(doc.Content) == 0 || yamlx.IsNull(yamlx.Deref(doc.Content[0])) {
		return map[string]any{}
	}
	saved := l.file
	l.file = p
	defer func() { l.file = saved }()
	m, err := l.vars(doc.Content[0])
	if err != nil {
		l.add(err)
		return nil
	}
	return m
}

// role loads one use of a role: its dependencies, then its tasks, and
// its handlers. A role already used in the play with the same params is
// not run again (Ansible's default, allow_duplicates: false).
func (l *loader) role(ref *roleRef, at *yaml.Node) (tasks, handlers []*Task) {
	if l.depth >= maxIncludeDepth {
		l.add(nodeErr(l.file, at, "role %q: roles depend on each other more than %d deep (a loop?)", ref.name, maxIncludeDepth))
		return nil, nil
	}
	dir, err := l.findRole(ref.name, at)
	if err != nil {
		l.add(err)
		return nil, nil
	}
	meta := l.roleMeta(dir)
	key := dir + "\x00" + ref.tasks + "\x00" + canonical(ref.params)
	if l.rolesSeen[key] && !meta.allowDuplicates {
		return nil, nil
	}
	l.rolesSeen[key] = true
	r := &Role{Name: filepath.Base(dir), Path: dir, Params: ref.params}
	r.Defaults = l.varsFile(mainFile(filepath.Join(dir, "defaults"), ref.defaults))
	r.Vars = l.varsFile(mainFile(filepath.Join(dir, "vars"), ref.vars))
	savedRole := l.curRole
	l.curRole = r
	l.depth++
	defer func() { l.curRole = savedRole; l.depth-- }()
	for _, dep := range meta.deps {
		saved := l.file
		l.file = meta.file
		dref, err := l.roleEntry(dep)
		if err != nil {
			l.add(err)
			l.file = saved
			continue
		}
		ts, hs := l.role(dref, dep)
		l.file = saved
		tasks = append(tasks, ts...)
		handlers = append(handlers, hs...)
	}
	// Ansible validates the role's arguments before its own tasks.
	own := l.argSpecTask(dir, ref.tasks)
	if p := mainFile(filepath.Join(dir, "tasks"), ref.tasks); p != "" {
		own = append(own, l.taskFile(p, false, at)...)
	} else if ref.tasks != "" {
		l.add(nodeErr(l.file, at, "role %q has no tasks file %q in %s", ref.name, ref.tasks, filepath.Join(dir, "tasks")))
	}
	var hs []*Task
	if p := mainFile(filepath.Join(dir, "handlers"), ref.handlers); p != "" && !l.handlersSeen[p] {
		l.handlersSeen[p] = true
		hs = l.taskFile(p, true, at)
	}
	(inherit{role: r}).apply(own)
	(inherit{role: r}).apply(hs)
	// The entry's when, tags and become reach its dependencies too, as
	// in Ansible (they are the role's parents).
	tasks = append(tasks, own...)
	ref.in.apply(tasks)
	if ref.in.env != nil {
		for _, t := range tasks {
			l.envNames(t, ref.in.env)
		}
	}
	return tasks, append(handlers, hs...)
}

// canonical is params as one comparable string.
func canonical(m map[string]any) string {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprint(m)
	}
	return string(b)
}

// roleMeta is what a role's meta/main.yml says that changes the run.
type roleMetaInfo struct {
	file            string
	deps            []*yaml.Node
	allowDuplicates bool
}

func (l *loader) roleMeta(dir string) roleMetaInfo {
	p := mainFile(filepath.Join(dir, "meta"), "")
	out := roleMetaInfo{file: p}
	if p == "" {
		return out
	}
	data, err := inputs.ReadFile(p, "role meta", inputs.MaxVarsFile)
	if err != nil {
		l.add(&Error{Pos: Pos{File: p, Line: 1, Col: 1}, Msg: err.Error()})
		return out
	}
	doc, err := parseYAML(p, data)
	if err != nil {
		l.add(err)
		return out
	}
	if len(doc.Content) == 0 {
		return out
	}
	v := yamlx.Deref(doc.Content[0])
	if v == nil || v.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := yamlx.Deref(v.Content[i]), yamlx.Deref(v.Content[i+1])
		if k == nil {
			continue
		}
		switch k.Value {
		case "dependencies":
			if x != nil && x.Kind == yaml.SequenceNode {
				out.deps = x.Content
			} else if !yamlx.IsNull(x) {
				l.add(nodeErr(p, x, "dependencies must be a list of roles"))
			}
		case "allow_duplicates":
			if x != nil && x.Kind == yaml.ScalarNode {
				out.allowDuplicates = strings.EqualFold(x.Value, "true") || strings.EqualFold(x.Value, "yes")
			}
		}
	}
	return out
}

// rolesPath is where roles are looked for besides the playbook's roles/:
// ANSIBLE_ROLES_PATH, else roles_path in the ansible.cfg Ansible would
// read (ANSIBLE_CONFIG, ./ansible.cfg, ~/.ansible.cfg,
// /etc/ansible/ansible.cfg; relative entries start at the file's
// directory), then Ansible's default directories.
func rolesPath() []string {
	defaults := []string{"~/.ansible/roles", "/usr/share/ansible/roles", "/etc/ansible/roles"}
	var out []string
	if env := os.Getenv("ANSIBLE_ROLES_PATH"); env != "" {
		out = splitPaths(env, "")
	} else if cfg := ansibleCfg(); cfg != "" {
		if v, ok := iniValue(cfg, "defaults", "roles_path"); ok {
			out = splitPaths(v, filepath.Dir(cfg))
		} else {
			out = splitPaths(strings.Join(defaults, ":"), "")
		}
	} else {
		out = splitPaths(strings.Join(defaults, ":"), "")
	}
	return out
}

func splitPaths(v, base string) []string {
	home, _ := os.UserHomeDir() // no home: ~ entries stay as written and are not found
	var out []string
	for _, p := range strings.Split(v, ":") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.HasPrefix(p, "~/") && home != "" {
			p = filepath.Join(home, p[2:])
		}
		if !filepath.IsAbs(p) && base != "" {
			p = filepath.Join(base, p)
		}
		out = append(out, p)
	}
	return out
}

// ansibleCfg is the configuration file Ansible reads, "" when none.
func ansibleCfg() string {
	if p := os.Getenv("ANSIBLE_CONFIG"); p != "" {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, "ansible.cfg")
		}
		return p
	}
	home, _ := os.UserHomeDir() // no home: that candidate is skipped
	for _, p := range []string{"ansible.cfg", filepath.Join(home, ".ansible.cfg"), "/etc/ansible/ansible.cfg"} {
		if p == ".ansible.cfg" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
	}
	return ""
}

// iniValue reads key in [section] of an INI file (Ansible's
// configparser: "key = value" or "key: value", # and ; comments).
func iniValue(path, section, key string) (string, bool) {
	data, err := inputs.ReadFile(path, "ansible.cfg", inputs.MaxVarsFile)
	if err != nil {
		return "", false
	}
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			cur = strings.TrimSpace(t[1 : len(t)-1])
			continue
		}
		if cur != section {
			continue
		}
		i := strings.IndexAny(t, "=:")
		if i < 0 {
			continue
		}
		if strings.TrimSpace(t[:i]) == key {
			return strings.TrimSpace(t[i+1:]), true
		}
	}
	return "", false
}

// includeVars rewrites a task `include_vars: FILE` (a literal name, or
// `file: FILE`) into set_fact of the file's variables, read at load: the
// variables are the host's from that task on, as Ansible's include_vars
// makes them (set_fact's precedence is one above include_vars'). The
// file is looked for in the role's vars/, beside the task file, and
// beside the playbook. A templated name, dir: and name: are refused.
func (l *loader) includeVars(v *yaml.Node) []*yaml.Node {
	for i := 0; i+1 < len(v.Content); i += 2 {
		k := yamlx.Deref(v.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode || strings.TrimPrefix(k.Value, fqcnPrefix) != "include_vars" {
			continue
		}
		val := yamlx.Deref(v.Content[i+1])
		var file string
		switch {
		case val != nil && val.Kind == yaml.ScalarNode:
			file = val.Value
		case val != nil && val.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(val.Content); j += 2 {
				kk := yamlx.Deref(val.Content[j])
				switch kk.Value {
				case "file":
					file = yamlx.Deref(val.Content[j+1]).Value
				default:
					l.add(nodeErr(l.file, kk, "include_vars: %q is not supported (give the file: a role's vars/ file or one beside the task)", kk.Value))
					return nil
				}
			}
		}
		var dirs []string
		if l.curRole != nil {
			dirs = append(dirs, filepath.Join(l.curRole.Path, "vars"), l.curRole.Path)
		}
		dirs = append(dirs, filepath.Dir(l.file), filepath.Join(filepath.Dir(l.file), "vars"), l.playDir)
		dirs = dedupeStrings(dirs)
		if strings.Contains(file, "{{") {
			return l.templatedVars(v, i, file, dirs)
		}
		if file == "" {
			l.add(nodeErr(l.file, v.Content[i+1], "include_vars: %q: give a file name", file))
			return nil
		}
		path := ""
		for _, d := range dirs {
			if p := filepath.Join(d, file); filepath.IsAbs(file) {
				path = file
				break
			} else if st, err := os.Stat(p); err == nil && !st.IsDir() {
				path = p
				break
			}
		}
		if path == "" {
			l.add(nodeErr(l.file, v.Content[i+1], "include_vars: %q not found (looked in %s)", file, strings.Join(dirs, ", ")))
			return nil
		}
		m := l.varsMapping(path, val)
		if m == nil {
			return nil
		}
		v.Content[i] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "set_fact", Line: k.Line, Column: k.Column}
		v.Content[i+1] = m
		return nil
	}
	return nil
}

// varsMapping reads a vars file as the mapping a set_fact sets; nil when
// it has problems (recorded).
func (l *loader) varsMapping(path string, at *yaml.Node) *yaml.Node {
	data, err := inputs.ReadFile(path, "vars file", inputs.MaxVarsFile)
	if err != nil {
		l.add(nodeErr(l.file, at, "include_vars: %v", err))
		return nil
	}
	doc, err := parseYAML(path, data)
	if err != nil {
		l.add(err)
		return nil
	}
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: at.Line, Column: at.Column}
	if len(doc.Content) > 0 {
		if root := yamlx.Deref(doc.Content[0]); root != nil && root.Kind == yaml.MappingNode {
			m.Content = root.Content
		} else if !yamlx.IsNull(root) {
			l.add(nodeErr(path, root, "a vars file must be a mapping of names to values"))
			return nil
		}
	}
	return m
}

// templatedVars reads an include_vars whose file name is a template
// ("{{ ansible_os_family }}.yml", or "{{ item }}" with with_first_found's
// list of names): every vars file a name can give (each {{ }} a wildcard,
// in the directories include_vars looks in) becomes a set_fact task of
// its variables, under the condition that the host picks that file (the
// first of the names that is a file found, for with_first_found). The
// task mapping v (include_vars at index i) is left as it was; the tasks
// that stand for it are returned.
func (l *loader) templatedVars(v *yaml.Node, i int, file string, dirs []string) []*yaml.Node {
	at := v.Content[i+1]
	terms := []string{file}
	var whenNode *yaml.Node
	var rest []*yaml.Node
	for j := 0; j+1 < len(v.Content); j += 2 {
		k := yamlx.Deref(v.Content[j])
		switch {
		case j == i:
		case k != nil && k.Value == "with_first_found":
			list := yamlx.Deref(v.Content[j+1])
			if strings.TrimSpace(file) != "{{ item }}" || list == nil || list.Kind != yaml.SequenceNode {
				l.add(nodeErr(l.file, k, "include_vars with with_first_found: give include_vars: \"{{ item }}\" and a list of file names"))
				return []*yaml.Node{}
			}
			terms = nil
			for _, it := range list.Content {
				s := yamlx.Deref(it)
				if s == nil || s.Kind != yaml.ScalarNode {
					l.add(nodeErr(l.file, it, "with_first_found: each item must be a file name, got %s", yamlx.KindName(s)))
					return []*yaml.Node{}
				}
				terms = append(terms, s.Value)
			}
		case k != nil && k.Value == "when":
			whenNode = v.Content[j+1]
		default:
			rest = append(rest, v.Content[j], v.Content[j+1])
		}
	}
	// Each term as an expression, and the files it can name.
	var exprs []string
	var cands []string
	found := map[string]string{}
	for _, term := range terms {
		e, glob, err := nameExpr(term)
		if err != nil {
			l.add(nodeErr(l.file, at, "include_vars: %v", err))
			return []*yaml.Node{}
		}
		exprs = append(exprs, e)
		for _, d := range dirs {
			matches, _ := filepath.Glob(filepath.Join(d, glob))
			sort.Strings(matches)
			for _, m := range matches {
				rel, err := filepath.Rel(d, m)
				if st, serr := os.Stat(m); err != nil || serr != nil || st.IsDir() {
					continue
				}
				if _, ok := found[rel]; !ok {
					found[rel] = m
					cands = append(cands, rel)
				}
			}
		}
	}
	var vfiles []string
	for _, c := range cands {
		// A wildcard's match that is no vars file (a task file beside
		// this one) is not a file the host could pick.
		if isVarsFile(found[c]) {
			vfiles = append(vfiles, c)
		}
	}
	cands = vfiles
	if len(cands) == 0 {
		l.add(nodeErr(l.file, at, "include_vars: no vars file matches %s (looked in %s)", strings.Join(terms, ", "), strings.Join(dirs, ", ")))
		return []*yaml.Node{}
	}
	// picked is the file the host picks: the first term that names a
	// file found (one term: the name itself).
	quoted := make([]string, len(cands))
	for k, c := range cands {
		quoted[k] = strconv.Quote(c)
	}
	set := "[" + strings.Join(quoted, ", ") + "]"
	picked := exprs[len(exprs)-1]
	if len(exprs) > 1 {
		picked = "''"
		for k := len(exprs) - 1; k >= 0; k-- {
			picked = fmt.Sprintf("(%s if (%s) in %s else %s)", exprs[k], exprs[k], set, picked)
		}
	}
	var out []*yaml.Node
	for _, c := range cands {
		m := l.varsMapping(found[c], at)
		if m == nil {
			return []*yaml.Node{}
		}
		when := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: at.Line, Column: at.Column}
		if w := yamlx.Deref(whenNode); w != nil && w.Kind == yaml.SequenceNode {
			when.Content = append(when.Content, w.Content...)
		} else if whenNode != nil {
			when.Content = append(when.Content, whenNode)
		}
		when.Content = append(when.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: quietTag, Style: yaml.DoubleQuotedStyle, Value: fmt.Sprintf("(%s) == %s", picked, strconv.Quote(c)), Line: at.Line, Column: at.Column})
		task := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: v.Line, Column: v.Column}
		task.Content = append(task.Content, rest...)
		task.Content = append(task.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "set_fact", Line: v.Content[i].Line, Column: v.Content[i].Column}, m,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "when", Line: at.Line, Column: at.Column}, when)
		out = append(out, task)
	}
	return out
}

// isVarsFile says the file at p reads as a mapping (or is empty).
func isVarsFile(p string) bool {
	data, err := inputs.ReadFile(p, "vars file", inputs.MaxVarsFile)
	if err != nil {
		return false
	}
	doc, err := parseYAML(p, data)
	if err != nil {
		return false
	}
	if len(doc.Content) == 0 {
		return true
	}
	root := yamlx.Deref(doc.Content[0])
	return root != nil && (root.Kind == yaml.MappingNode || yamlx.IsNull(root))
}

// nameExpr is a file name template ("setup-{{ x }}.yml") as a Jinja
// expression ("setup-" ~ (x) ~ ".yml") and as a glob (setup-*.yml).
func nameExpr(file string) (string, string, error) {
	if strings.Contains(file, "{%") {
		return "", "", fmt.Errorf("%q: only {{ }} is supported in a file name", file)
	}
	var expr []string
	var glob strings.Builder
	rest := file
	for rest != "" {
		i := strings.Index(rest, "{{")
		if i < 0 {
			expr = append(expr, strconv.Quote(rest))
			glob.WriteString(rest)
			break
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return "", "", fmt.Errorf("%q: unclosed {{", file)
		}
		if i > 0 {
			expr = append(expr, strconv.Quote(rest[:i]))
			glob.WriteString(rest[:i])
		}
		expr = append(expr, "("+strings.TrimSpace(rest[i+2:i+j])+")")
		glob.WriteString("*")
		rest = rest[i+j+2:]
	}
	return strings.Join(expr, " ~ "), glob.String(), nil
}

// includeItems reads an include's loop: a list written out, whose items
// hold no template (nodeconverge expands an include loop at load, before
// any host's variables are known).
func (l *loader) includeItems(n *yaml.Node, kind string) ([]any, error) {
	v := yamlx.Deref(n)
	if v == nil || v.Kind != yaml.SequenceNode {
		return nil, nodeErr(l.file, n, "loop on %s: give the list itself (nodeconverge expands an include's loop at load, before any host's variables are known; a loop over a template is not supported)", kind)
	}
	var bad *yaml.Node
	var walk func(*yaml.Node, int)
	walk = func(x *yaml.Node, depth int) {
		x = yamlx.Deref(x)
		if x == nil || depth > 50 || bad != nil {
			return
		}
		if x.Kind == yaml.ScalarNode && jinja.Has(x.Value) {
			bad = x
		}
		for _, c := range x.Content {
			walk(c, depth+1)
		}
	}
	walk(v, 0)
	if bad != nil {
		return nil, nodeErr(l.file, bad, "loop on %s: %q: a template in an include's loop is not supported (it is expanded at load); write the item out", kind, bad.Value)
	}
	x, err := decodeValue(l.file, v)
	if err != nil {
		return nil, err
	}
	items, _ := x.([]any)
	return items, nil
}

// itemName renders an include loop's file name for one item: the
// template may read only the loop's variables.
func (l *loader) itemName(file, loopVar, indexVar string, item any, i int, at *yaml.Node, kind string) (string, error) {
	if !jinja.Has(file) {
		return file, nil
	}
	tpl, err := jinja.Parse(file)
	if err != nil {
		return "", nodeErr(l.file, at, "%s: %v", kind, err)
	}
	for _, n := range tpl.Names() {
		if n != loopVar && n != indexVar {
			return "", nodeErr(l.file, at, "%s: %q reads %s: in a loop, an include's file name may read only %s (it is expanded at load)", kind, file, n, loopVar)
		}
	}
	vars := map[string]any{loopVar: item}
	if indexVar != "" {
		vars[indexVar] = i
	}
	name, err := tpl.Render(vars)
	if err != nil {
		return "", nodeErr(l.file, at, "%s: %v", kind, err)
	}
	return name, nil
}

// includeGuard is the task that fails a host where a templated
// include_tasks name (the expression name) renders to none of the files
// rels read at load, as Ansible's include fails on a file it cannot find:
// without it the host would run none of them and go on as if converged.
// It stands where Ansible's include task does, and counts as it does (ok
// where it includes, skipped where the include's when: is false).
func (l *loader) includeGuard(file, name string, rels []string, handler bool, at *yaml.Node) []*Task {
	line, col := at.Line, at.Column
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Line: line, Column: col}
	}
	quoted := make([]string, len(rels))
	for i, rel := range rels {
		quoted[i] = strconv.Quote(rel)
	}
	task := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line, Column: col, Content: []*yaml.Node{
		str("name"), str("include_tasks: " + file),
		str("assert"), {Kind: yaml.MappingNode, Tag: "!!map", Line: line, Column: col, Content: []*yaml.Node{
			str("that"), str(fmt.Sprintf("(%s) in [%s]", name, strings.Join(quoted, ", "))),
			str("fail_msg"), str(fmt.Sprintf("include_tasks renders to {{ %s }} here, and no such task file was found (read at load: %s)", name, strings.Join(rels, ", "))),
			str("quiet"), {Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true", Line: line, Column: col},
		}},
	}}
	if t := l.task(task, handler); t != nil {
		t.standsForInclude = true
		return []*Task{t}
	}
	return nil
}

// templatedInclude reads an include_tasks whose file name is a template
// of the host's variables ("setup-{{ ansible_os_family }}.yml"): every
// task file the name can give (the name with each {{ }} as a wildcard,
// where include_tasks looks) is read, each under the condition that the
// name renders to it on the host. Ansible reads only the one a host
// renders; nodeconverge reads them all, so --syntax-check sees every one,
// and decides per host which runs.
func (l *loader) templatedInclude(file string, handler bool, at *yaml.Node) []*Task {
	name, globPat, err := nameExpr(file)
	if err != nil {
		l.add(nodeErr(l.file, at, "include_tasks: %v", err))
		return nil
	}
	var dirs []string
	dirs = append(dirs, filepath.Dir(l.file))
	if l.curRole != nil {
		dirs = append(dirs, filepath.Join(l.curRole.Path, "tasks"), l.curRole.Path)
	}
	dirs = append(dirs, l.playDir)
	seen := map[string]bool{}
	var rels []string
	paths := map[string]string{}
	for _, d := range dedupeStrings(dirs) {
		matches, err := filepath.Glob(filepath.Join(d, globPat))
		if err != nil {
			l.add(nodeErr(l.file, at, "include_tasks: %q: %v", file, err))
			return nil
		}
		sort.Strings(matches)
		for _, m := range matches {
			rel, err := filepath.Rel(d, m)
			if st, serr := os.Stat(m); err != nil || serr != nil || st.IsDir() || seen[rel] {
				continue
			}
			seen[rel] = true
			rels = append(rels, rel)
			paths[rel] = m
		}
	}
	if len(rels) == 0 {
		l.add(nodeErr(l.file, at, "include_tasks: %q: no task file matches %s (looked in %s)", file, globPat, strings.Join(dedupeStrings(dirs), ", ")))
		return nil
	}
	out := l.includeGuard(file, name, rels, handler, at)
	for _, rel := range rels {
		src := fmt.Sprintf("(%s) == %s", name, strconv.Quote(rel))
		e, err := jinja.ParseExpr(src)
		if err != nil {
			l.add(nodeErr(l.file, at, "include_tasks: %q: %v", file, err))
			return nil
		}
		// (The guard stands for the include: no marker per file.)
		ts := l.taskFile(paths[rel], handler, at)
		inherit{when: []*Cond{{Expr: e, Src: src, Pos: posOf(l.file, at), Quiet: true}}}.apply(ts)
		out = append(out, ts...)
	}
	return out
}
