package jinja

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"

	"nodeconverge/engine/inputs"
)

// The lookups that read the controller's files: file, template and
// first_found, found as Ansible finds them, on the task's search path
// (its role's directory, its task file's, the playbook's), in the
// subdirectory the kind of file belongs in (files/, templates/, vars/),
// then in the directory itself. The renderer gives a task's search path
// and module in SearchPathVar and ActionVar.

// SearchPathVar and ActionVar are the variables a task's render sets for
// the file lookups: its search path (a list of directories) and its
// module's name. Their names cannot clash with a playbook's variables
// (a variable name in a playbook starts with a letter or one _).
const (
	SearchPathVar = "__nodeconverge_search_path"
	ActionVar     = "__nodeconverge_action"
)

// maxLookupFile bounds a file a lookup reads.
const maxLookupFile = inputs.MaxVarsFile

// searchPath reads SearchPathVar from the template's variables.
func searchPath(e *exec.Evaluator) []string {
	v, ok := e.Environment.Context.Get(SearchPathVar)
	if !ok {
		return nil
	}
	var out []string
	switch l := v.(type) {
	case []string:
		out = l
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// findFile is where name is on the search path, in subdir of each
// directory and then the directory itself; "" when it is nowhere. An
// absolute name is itself.
func findFile(dirs []string, subdir, name string) (string, []string) {
	if filepath.IsAbs(name) {
		if st, err := os.Stat(name); err == nil && !st.IsDir() {
			return name, nil
		}
		return "", []string{name}
	}
	var looked []string
	for _, d := range dirs {
		for _, p := range []string{filepath.Join(d, subdir, name), filepath.Join(d, name)} {
			looked = append(looked, p)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
		}
	}
	return "", looked
}

// lookupFile is lookup('file', ...): each file's content, trailing
// blanks stripped (Ansible's rstrip=True) unless rstrip=False.
func lookupFile(e *exec.Evaluator, params *exec.VarArgs, terms []*exec.Value) ([]any, error) {
	rstrip := true
	if v, ok := params.KwArgs["rstrip"]; ok {
		rstrip = Truth(native(v))
	}
	var out []any
	for _, t := range terms {
		p, looked := findFile(searchPath(e), "files", t.String())
		if p == "" {
			return nil, fmt.Errorf("lookup('file'): could not find %q (looked in %s)", t.String(), strings.Join(looked, ", "))
		}
		b, err := inputs.ReadFile(p, "file lookup", maxLookupFile)
		if err != nil {
			return nil, fmt.Errorf("lookup('file'): %w", err)
		}
		s := string(b)
		if rstrip {
			s = strings.TrimRight(s, " \t\r\n")
		}
		out = append(out, s)
	}
	return out, nil
}

// lookupTemplate is lookup('template', ...): each template file, found
// in templates/, rendered with the task's variables.
func lookupTemplate(e *exec.Evaluator, terms []*exec.Value) ([]any, error) {
	var out []any
	for _, t := range terms {
		p, looked := findFile(searchPath(e), "templates", t.String())
		if p == "" {
			return nil, fmt.Errorf("lookup('template'): could not find %q (looked in %s)", t.String(), strings.Join(looked, ", "))
		}
		b, err := inputs.ReadFile(p, "template", maxLookupFile)
		if err != nil {
			return nil, fmt.Errorf("lookup('template'): %w", err)
		}
		tpl, err := ParseWith(string(b), Options{TrimBlocks: true})
		if err != nil {
			return nil, fmt.Errorf("lookup('template'): %s: %w", p, err)
		}
		s, err := tpl.tpl.ExecuteToString(e.Environment.Context)
		if err != nil {
			return nil, fmt.Errorf("lookup('template'): %s: %w", p, renderErr(err))
		}
		out = append(out, s)
	}
	return out, nil
}

// firstFoundSubdir is where first_found looks for a task's files, by its
// module, as Ansible's does.
func firstFoundSubdir(action string) string {
	switch strings.TrimPrefix(action, "ansible.builtin.") {
	case "template":
		return "templates"
	case "include_vars", "set_fact":
		// include_vars is read as set_fact.
		return "vars"
	}
	return "files"
}

// FirstFound is Ansible's first_found: the first of the files terms names
// that exists, as a one-item list ([] when none does and skip is set).
// terms are strings, lists of them, or mappings with files:, paths: and
// skip: (Ansible's forms); a file is looked for in each of paths (relative
// to the search path's last directory, the playbook's, when relative),
// else on the search path.
func FirstFound(terms []any, dirs []string, action string) ([]any, error) {
	var files, paths []string
	skip := false
	var add func(any) error
	add = func(x any) error {
		switch v := x.(type) {
		case string:
			// Ansible splits a term on , ; and : when it names no paths.
			files = append(files, v)
		case []any:
			for _, it := range v {
				if err := add(it); err != nil {
					return err
				}
			}
		case map[string]any:
			for k, val := range v {
				switch k {
				case "files":
					if err := add(val); err != nil {
						return err
					}
				case "paths":
					switch ps := val.(type) {
					case string:
						paths = append(paths, ps)
					case []any:
						for _, p := range ps {
							paths = append(paths, Text(p))
						}
					}
				case "skip":
					skip = Truth(val)
				default:
					return fmt.Errorf("first_found: unknown option %q (files, paths, skip)", k)
				}
			}
		default:
			return fmt.Errorf("first_found: a term is a file name, a list of them, or a mapping with files and paths, got %s", Text(x))
		}
		return nil
	}
	for _, t := range terms {
		if err := add(t); err != nil {
			return nil, err
		}
	}
	subdir := firstFoundSubdir(action)
	var looked []string
	for _, f := range files {
		if len(paths) == 0 {
			p, l := findFile(dirs, subdir, f)
			if p != "" {
				return []any{p}, nil
			}
			looked = append(looked, l...)
			continue
		}
		for _, d := range paths {
			if !filepath.IsAbs(d) && len(dirs) > 0 {
				d = filepath.Join(dirs[len(dirs)-1], d)
			}
			p := filepath.Join(d, f)
			if filepath.IsAbs(f) {
				p = f
			}
			looked = append(looked, p)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return []any{p}, nil
			}
		}
	}
	if skip {
		return []any{}, nil
	}
	return nil, fmt.Errorf("first_found: no file was found (looked in %s)", strings.Join(looked, ", "))
}

// lookupFirstFound is lookup('first_found', ...).
func lookupFirstFound(e *exec.Evaluator, params *exec.VarArgs, terms []*exec.Value) ([]any, error) {
	var ts []any
	for _, t := range terms {
		ts = append(ts, native(t))
	}
	if len(params.KwArgs) > 0 {
		opts := map[string]any{}
		for k, v := range params.KwArgs {
			if k != "wantlist" {
				opts[k] = native(v)
			}
		}
		if len(opts) > 0 {
			ts = append(ts, opts)
		}
	}
	action := ""
	if v, ok := e.Environment.Context.Get(ActionVar); ok {
		action, _ = v.(string)
	}
	return FirstFound(ts, searchPath(e), action)
}
