package playbook

import (
	"fmt"
	"sync"

	"nodeconverge/engine/jinja"
	"nodeconverge/engine/module"
)

// Variables whose values are templates are rendered when something reads
// them, as Ansible's are: `dir: "{{ base }}/conf.d"` in a play's vars, a
// role's defaults or the inventory is `/etc/containerd/conf.d` wherever a
// task reads dir, with the host's base. Only what a task reads is
// rendered (an unused default that reads an undefined variable is no
// error, as in Ansible). Values from nodes (registered results, facts)
// are data and never rendered.

// templateCache holds the templates of variables' values, parsed once per
// run: every host renders the same defaults.
var templateCache sync.Map // string -> *jinja.Template

// parsedTemplate is src parsed, from the cache when it was parsed before.
func parsedTemplate(src string) (*jinja.Template, error) {
	if t, ok := templateCache.Load(src); ok {
		return t.(*jinja.Template), nil
	}
	t, err := jinja.Parse(src)
	if err != nil {
		return nil, err
	}
	templateCache.Store(src, t)
	return t, nil
}

// maxVarDepth bounds how deep variables' templates may refer to others.
const maxVarDepth = 64

// Resolve returns vars with the values of names, and of the variables
// their templates read, rendered. vars is not changed. data names the
// variables whose values are data (registered results, facts): never
// rendered. A template that reads itself, directly or through others, is
// an error, as in Ansible.
func Resolve(vars map[string]any, names []string, data map[string]bool) (map[string]any, error) {
	rv := &resolver{vars: vars, data: data, state: map[string]int{}}
	for _, n := range names {
		if err := rv.visit(n, 0); err != nil {
			return nil, err
		}
	}
	if rv.out == nil {
		return vars, nil
	}
	return rv.out, nil
}

// ResolveAll renders every variable whose value is a template, for a
// module that renders a file of its own (template's src reads what it
// likes). A variable whose template does not render is left out, so a
// file that reads it fails on it as undefined.
func ResolveAll(vars map[string]any, data map[string]bool) map[string]any {
	rv := &resolver{vars: vars, data: data, state: map[string]int{}, lenient: true}
	for n := range vars {
		if err := rv.visit(n, 0); err != nil {
			// A loop of templates: the file fails on it as undefined.
			rv.set(n, nil, true)
		}
	}
	if rv.out == nil {
		return vars
	}
	return rv.out
}

type resolver struct {
	vars, out map[string]any
	data      map[string]bool
	state     map[string]int // 1: being rendered, 2: done
	lenient   bool
}

func (rv *resolver) get(n string) (any, bool) {
	if rv.out != nil {
		v, ok := rv.out[n]
		return v, ok
	}
	v, ok := rv.vars[n]
	return v, ok
}

func (rv *resolver) set(n string, v any, drop bool) {
	if rv.out == nil {
		rv.out = make(map[string]any, len(rv.vars))
		for k, x := range rv.vars {
			rv.out[k] = x
		}
	}
	if drop {
		delete(rv.out, n)
		return
	}
	rv.out[n] = v
}

func (rv *resolver) visit(n string, depth int) error {
	if rv.state[n] == 2 || rv.data[n] || n == "hostvars" || n == "groups" {
		return nil
	}
	v, ok := rv.get(n)
	if !ok || !hasTemplateValue(v, 0) {
		rv.state[n] = 2
		return nil
	}
	if rv.state[n] == 1 || depth > maxVarDepth {
		return fmt.Errorf("variable %q: recursive loop detected in its template (it reads itself)", n)
	}
	rv.state[n] = 1
	out, err := rv.render(n, v, depth, 0)
	rv.state[n] = 2
	if err != nil {
		if rv.lenient {
			rv.set(n, nil, true)
			return nil
		}
		return err
	}
	rv.set(n, out, false)
	return nil
}

func (rv *resolver) render(name string, v any, depth, level int) (any, error) {
	if level > 50 {
		return v, nil
	}
	switch x := v.(type) {
	case string:
		if !jinja.Has(x) {
			return x, nil
		}
		t, err := parsedTemplate(x)
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", name, err)
		}
		for _, m := range t.Names() {
			if m == name {
				return nil, fmt.Errorf("variable %q: recursive loop detected in its template (it reads itself)", name)
			}
			if err := rv.visit(m, depth+1); err != nil {
				return nil, err
			}
		}
		cur := rv.vars
		if rv.out != nil {
			cur = rv.out
		}
		out, err := t.Value(cur)
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", name, err)
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := rv.render(name, e, depth, level+1)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := rv.render(name, e, depth, level+1)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

// hasTemplateValue says whether v holds a template anywhere.
func hasTemplateValue(v any, level int) bool {
	if level > 50 {
		return false
	}
	switch x := v.(type) {
	case string:
		return jinja.Has(x)
	case []any:
		for _, e := range x {
			if hasTemplateValue(e, level+1) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if hasTemplateValue(e, level+1) {
				return true
			}
		}
	}
	return false
}

// ResolveFor renders what task t reads of vars (Resolve with its names);
// for a module that renders a file of its own (template), every other
// templated variable too, leniently (ResolveAll), since the file may read
// any of them.
func (t *Task) ResolveFor(vars map[string]any, data map[string]bool) (map[string]any, error) {
	// The file lookups (file, template, first_found) find files on the
	// task's search path, as Ansible's do.
	dirs := make([]any, len(t.searchDirs))
	for i, d := range t.searchDirs {
		dirs[i] = d
	}
	vars = MergeVars(vars, map[string]any{jinja.SearchPathVar: dirs, jinja.ActionVar: t.Module})
	if per := t.itemVars(); per != nil {
		// Rendered per item, in Render.
		d := make(map[string]bool, len(data)+len(per))
		for k, v := range data {
			d[k] = v
		}
		for k := range per {
			d[k] = true
		}
		data = d
	}
	out, err := Resolve(vars, t.Names(), data)
	if err != nil {
		return nil, err
	}
	if m, ok := module.Lookup(t.Module); ok && m.Inputs&module.InputVars != 0 {
		out = ResolveAll(out, data)
	}
	return out, nil
}
