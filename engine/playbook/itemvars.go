package playbook

import "sort"

// A task's own vars: may read its loop variable (`vars: config: "{{
// unit_item }}"` beside `loop_control: {loop_var: unit_item}`, as
// 0x0I's systemd role writes): Ansible renders them per item. Such vars
// are left as written when the task's variables are resolved once for
// the host (ResolveFor), and rendered for each item in Render, with the
// item, the index and what the earlier items set in view.

// itemVars names the task's own vars whose templates read the loop or
// index variable, directly or through another of these vars.
func (t *Task) itemVars() map[string]bool {
	if t.Loop == nil || len(t.Vars) == 0 {
		return nil
	}
	reads := map[string][]string{}
	for k, v := range t.Vars {
		if hasTemplateValue(v, 0) {
			reads[k] = templateNames(v, 0)
		}
	}
	out := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for k, names := range reads {
			if out[k] {
				continue
			}
			for _, n := range names {
				if n == t.LoopVar() || (t.indexVar != "" && n == t.indexVar) || out[n] {
					out[k], changed = true, true
					break
				}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// templateNames is every variable the templates in v read.
func templateNames(v any, level int) []string {
	if level > 50 {
		return nil
	}
	var out []string
	switch x := v.(type) {
	case string:
		if t, err := parsedTemplate(x); err == nil && t != nil {
			out = append(out, t.Names()...)
		}
	case []any:
		for _, e := range x {
			out = append(out, templateNames(e, level+1)...)
		}
	case map[string]any:
		for _, e := range x {
			out = append(out, templateNames(e, level+1)...)
		}
	}
	return out
}

// withItemVars is iv with the task's per-item vars rendered in it; every
// other variable is data there (already resolved for the host).
func (t *Task) withItemVars(iv map[string]any, per map[string]bool) (map[string]any, error) {
	raw := make(map[string]any, len(per))
	names := make([]string, 0, len(per))
	for n := range per {
		raw[n] = t.Vars[n]
		names = append(names, n)
	}
	sort.Strings(names)
	data := make(map[string]bool, len(iv))
	for k := range iv {
		if !per[k] {
			data[k] = true
		}
	}
	return Resolve(MergeVars(iv, raw), names, data)
}
