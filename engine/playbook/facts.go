package playbook

import (
	"fmt"
	"sort"
	"strings"

	"nodeconverge/engine/facts"
	"nodeconverge/engine/jinja"
)

// Which facts a task reads is decided at load: the ansible_* names its
// conditions and templates read (ansible_os_family, and
// ansible_facts.os_family or ansible_facts['os_family']), directly or
// through the templates of the play's and its own vars. A fact outside
// the set nodeconverge gathers (engine/facts) is an error there, naming
// it, and so is one the play's gather_subset leaves out: a play that
// loads never stops at run on a fact it cannot have.

// notFacts are the ansible_* variables that are not facts: connection
// and privilege settings from the inventory, and Ansible's magic
// variables.
var notFacts = map[string]bool{
	"ansible_host": true, "ansible_port": true, "ansible_user": true, "ansible_password": true,
	"ansible_connection": true, "ansible_private_key_file": true, "ansible_shell_type": true,
	"ansible_shell_executable": true, "ansible_python_interpreter": true, "ansible_timeout": true,
	"ansible_pipelining": true, "ansible_check_mode": true, "ansible_diff_mode": true, "ansible_verbosity": true,
	"ansible_forks": true, "ansible_version": true, "ansible_play_hosts": true, "ansible_play_hosts_all": true,
	"ansible_play_batch": true, "ansible_play_name": true, "ansible_play_role_names": true,
	"ansible_role_names": true, "ansible_role_name": true, "ansible_parent_role_names": true,
	"ansible_parent_role_paths": true, "ansible_dependent_role_names": true, "ansible_collection_name": true,
	"ansible_run_tags": true, "ansible_skip_tags": true, "ansible_limit": true, "ansible_loop": true,
	"ansible_loop_var": true, "ansible_index_var": true, "ansible_inventory_sources": true,
	"ansible_config_file": true, "ansible_playbook_python": true, "ansible_search_path": true,
	"ansible_local": true, "ansible_facts": true, "ansible_managed": true, "ansible_failed_task": true, "ansible_failed_result": true,
	"ansible_vault_password": true, "ansible_sudo_pass": true, "ansible_ssh_host": true, "ansible_ssh_port": true,
	"ansible_ssh_user": true, "ansible_ssh_pass": true, "ansible_ssh_private_key_file": true,
}

// isSetting says an ansible_ name is a connection or privilege setting
// (ansible_become_user, ansible_ssh_common_args, ...).
func isSetting(n string) bool {
	return notFacts[n] || strings.HasPrefix(n, "ansible_become") || strings.HasPrefix(n, "ansible_ssh_") ||
		strings.HasPrefix(n, "ansible_sftp_") || strings.HasPrefix(n, "ansible_scp_") || strings.HasSuffix(n, "_interpreter")
}

// reads is what one template or expression reads: its names and the keys
// it reads off ansible_facts.
type reads struct {
	names, factKeys []string
}

func readsOf(names []string, attrs func(string) []string) reads {
	return reads{names: names, factKeys: attrs("ansible_facts")}
}

// varReads collects what the templates in a variable's value read.
func varReads(v any, depth int, out *reads) {
	if depth > 50 {
		return
	}
	switch x := v.(type) {
	case string:
		if !jinja.Has(x) {
			return
		}
		if t, err := parsedTemplate(x); err == nil {
			out.names = append(out.names, t.Names()...)
			out.factKeys = append(out.factKeys, t.Attrs("ansible_facts")...)
		}
	case []any:
		for _, e := range x {
			varReads(e, depth+1, out)
		}
	case map[string]any:
		for _, e := range x {
			varReads(e, depth+1, out)
		}
	}
}

// checkFacts decides each task's Facts and reports every fact a task
// reads that the play cannot have.
func (l *loader) checkFacts(p *Play) {
	defined := map[string]bool{}
	byVar := map[string]reads{}
	for k, v := range p.Vars {
		defined[k] = true
		var r reads
		varReads(v, 0, &r)
		byVar[k] = r
	}
	for _, t := range p.AllTasks() {
		if t.Register != "" {
			defined[t.Register] = true
		}
		for _, n := range t.Sets {
			defined[n] = true
		}
	}
	for _, t := range p.AllTasks() {
		direct := reads{names: t.Names()}
		for _, tpl := range t.templates {
			direct.factKeys = append(direct.factKeys, tpl.Attrs("ansible_facts")...)
		}
		for _, cs := range [][]*Cond{t.When, t.ChangedWhen, t.FailedWhen, t.Until} {
			for _, c := range cs {
				direct.factKeys = append(direct.factKeys, c.Expr.Attrs("ansible_facts")...)
			}
		}
		// The variables the task sees, highest first: its own, its
		// role's params and vars, the play's, its role's defaults.
		rd, rv, rp := t.Layers()
		var layers []map[string]reads
		for _, m := range []map[string]any{t.Vars, rp, rv} {
			layers = append(layers, readsOfVars(m))
		}
		layers = append(layers, byVar, readsOfVars(rd))
		// The closure over the variables' templates, task vars first.
		seen := map[string]bool{}
		var fs []string
		bad := map[string]string{}
		var walk func(r reads, depth int)
		walk = func(r reads, depth int) {
			if depth > 50 {
				return
			}
			for _, k := range r.factKeys {
				fs = append(fs, k)
				if _, ok := facts.Known(k); !ok {
					bad["ansible_facts."+k] = k
				}
			}
			for _, n := range r.names {
				if seen[n] {
					continue
				}
				seen[n] = true
				found := false
				for _, lay := range layers {
					if vr, ok := lay[n]; ok {
						walk(vr, depth+1)
						found = true
						break
					}
				}
				if found {
					continue
				}
				if defined[n] || !strings.HasPrefix(n, "ansible_") || isSetting(n) {
					continue
				}
				k := strings.TrimPrefix(n, "ansible_")
				fs = append(fs, k)
				if _, ok := facts.Known(k); !ok {
					bad[n] = k
				}
			}
		}
		walk(direct, 0)
		t.Facts = dedupeStrings(fs)
		for _, n := range sortedKeys(bad) {
			l.add(&Error{Pos: t.Pos, Msg: fmt.Sprintf("%s reads the fact %s, which nodeconverge does not gather (it gathers %s; docs/ansible-compatibility.md, Facts)", taskLabel(t), n, strings.Join(facts.Names(), ", "))})
		}
		if !p.GatherFacts {
			continue
		}
		for _, k := range t.Facts {
			if sub, ok := facts.Known(k); ok && !p.Subset[sub] {
				l.add(&Error{Pos: t.Pos, Msg: fmt.Sprintf("%s reads the fact ansible_%s, which the play's gather_subset leaves out (it is in the %q subset)", taskLabel(t), k, sub)})
			}
		}
	}
}

// readsOfVars is what each variable's value reads.
func readsOfVars(m map[string]any) map[string]reads {
	out := make(map[string]reads, len(m))
	for k, v := range m {
		var r reads
		varReads(v, 0, &r)
		out[k] = r
	}
	return out
}

func dedupeStrings(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
