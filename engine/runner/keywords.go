package runner

import (
	"fmt"
	"strings"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// Ansible's task keywords that decide per host: when, register,
// changed_when, failed_when, ignore_errors.
//
// Preflight evaluates a task's when: on each host where it reads no
// registered variable: a false one skips the task there (its arguments
// are not rendered, as in Ansible). A task whose when: or arguments read
// a variable an earlier task registers is decided on the host when it is
// reached ("later"), with the host's registered results.
//
// In apply mode the up-front plan of a host plans such a task with the
// results the plan predicts (a file module's changed, from its plan); a
// task that reads a command's result cannot be planned before the
// command ran, and is planned when the rest of the play is planned again
// after the command (as every task after a command is).
//
// Check mode runs no command: a command's registered result is Ansible's
// for a skipped task ({skipped: true, changed: false}); a later when: that
// reads what only running it would give (result.rc, result.stdout) skips
// its task, saying so, where Ansible would fail it.

// registeredNames are the variables the play's tasks register.
func registeredNames(p *playbook.Play) map[string]bool {
	out := map[string]bool{}
	for _, t := range p.AllTasks() {
		if t.Register != "" {
			out[t.Register] = true
		}
		for _, n := range t.Sets {
			out[n] = true
		}
		if t.Block != nil {
			// A rescue's failure variables are the host's once a task
			// of its block failed there (blocks.go).
			out["ansible_failed_task"], out["ansible_failed_result"] = true, true
		}
	}
	return out
}

// readsRegistered says whether the task's conditions or arguments read a
// variable the play registers.
func readsRegistered(t *playbook.Task, reg map[string]bool) bool {
	for _, n := range t.Names() {
		if reg[n] {
			return true
		}
	}
	return false
}

// whenOf is the task's when: as decided once per host: none for a loop
// whose when: reads item (Render decides it per item).
func whenOf(t *playbook.Task) []*playbook.Cond {
	if t.WhenPerItem() {
		return nil
	}
	return t.When
}

// quietSkip is why a task of a templated include's other file is skipped
// on a host (playbook.Cond.Quiet): it is not the host's task, so it is
// skipped without a result, a count or a registered value.
const quietSkip = "\x00not this host's file"

// falseCondition is the skip message, in Ansible's words.
func falseCondition(c *playbook.Cond) string {
	if c.Quiet {
		return quietSkip
	}
	return fmt.Sprintf("Conditional result was False (when: %s)", c.Src)
}

// taskVars are the variables of t on host h: Ansible's groups and
// hostvars, its role's defaults, the host's own, its facts, the play's,
// its role's vars, the task's, what earlier tasks registered, its role's
// params, and -e above all. The templated values the
// task reads are rendered (playbook.Resolve); facts and registered
// results are data.
func taskVars(h *inventory.Host, p *playbook.Play, t *playbook.Task, facts, registered map[string]any, o Options) (map[string]any, error) {
	base := map[string]any{"inventory_hostname": h.Name, "inventory_hostname_short": strings.SplitN(h.Name, ".", 2)[0], "group_names": h.Groups,
		"ansible_check_mode": o.Check, "ansible_verbosity": o.Verbosity}
	var tv map[string]any
	if t != nil {
		tv = t.Vars
	}
	var rd, rv, rp map[string]any
	if t != nil {
		rd, rv, rp = t.Layers()
	}
	// Ansible's precedence: role defaults, inventory, facts, play vars,
	// role vars, task vars, registered results and set_fact, role
	// params, -e.
	vars := playbook.MergeVars(o.magic, base, rd, h.Vars, facts, p.Vars, rv, tv, registered, rp, o.ExtraVars)
	if t == nil {
		return vars, nil
	}
	data := map[string]bool{}
	for _, l := range []map[string]any{facts, registered} {
		for k := range l {
			if _, extra := o.ExtraVars[k]; !extra {
				data[k] = true
			}
		}
	}
	return t.ResolveFor(vars, data)
}

// magicVars are Ansible's groups (every group's hosts, children's
// included, in inventory order) and hostvars (every host's variables).
func magicVars(inv *inventory.Inventory) map[string]any {
	if inv == nil {
		return map[string]any{}
	}
	groups := map[string]any{}
	for name := range inv.Groups {
		hs, err := inv.Select(name)
		if err != nil {
			continue
		}
		names := make([]any, 0, len(hs))
		for _, h := range hs {
			names = append(names, h.Name)
		}
		groups[name] = names
	}
	hostvars := map[string]any{}
	for name, h := range inv.Hosts {
		hostvars[name] = h.Vars
	}
	return map[string]any{"groups": groups, "hostvars": hostvars}
}

// argsOf is the task's rendered arguments on the host: rendered at
// preflight, or later, when the host reached it.
func (r *runner) argsOf(t *playbook.Task, s *hostRun) module.Args {
	if a, ok := s.late[t]; ok {
		return a
	}
	return s.args[t]
}

// keepLate records, for a task Preflight left for later on the host, the
// arguments it was rendered with there (argsOf reads them).
func (r *runner) keepLate(s *hostRun, t *playbook.Task, a module.Args) {
	if !r.later[t] {
		return
	}
	if s.late == nil {
		s.late = map[*playbook.Task]module.Args{}
	}
	s.late[t] = a
}

// decide evaluates, on a host that reached the task, what Preflight left
// for later: its when: and its arguments. It returns a non-empty skip
// message when the task does not run there.
func (r *runner) decide(s *hostRun, p *playbook.Play, t *playbook.Task, registered map[string]any) (string, module.Args, error) {
	if why, ok := s.skip[t]; ok {
		return why, nil, nil
	}
	if !r.later[t] {
		return "", s.args[t], nil
	}
	vars, err := taskVars(s.host, p, t, s.facts, registered, r.o)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", t.Pos, err)
	}
	ok, c, err := playbook.Holds(whenOf(t), vars)
	if err != nil {
		if r.o.Check && readsSkipped(t, registered) {
			return fmt.Sprintf("check mode: when: %q reads the result of a command check mode did not run", c.Src), nil, nil
		}
		return "", nil, err
	}
	if !ok {
		return falseCondition(c), nil, nil
	}
	a, err := t.Render(vars)
	if err != nil {
		if r.o.Check && readsSkipped(t, registered) {
			return "check mode: the arguments read the result of a command check mode did not run", nil, nil
		}
		return "", nil, err
	}
	return "", a, nil
}

// readsSkipped says whether t reads a registered result of a task that
// was skipped (a command in check mode).
func readsSkipped(t *playbook.Task, registered map[string]any) bool {
	for _, n := range t.Names() {
		if m, ok := registered[n].(map[string]any); ok && m["skipped"] == true {
			return true
		}
	}
	return false
}

// resultVar is a task's result as `register:` keeps it, in Ansible's
// shape.
func resultVar(tr *report.TaskResult) map[string]any {
	out := map[string]any{}
	// The module's own return values (stat's stat, service's state)
	// first: the keys every result has win over them.
	if tr.Plan != nil && tr.Plan.ItemValues == nil {
		for k, v := range tr.Plan.Vars {
			out[k] = v
		}
		if len(tr.Plan.Facts) > 0 {
			out["ansible_facts"] = tr.Plan.Facts
		}
	}
	if tr.Result != nil && tr.Result.ItemValues == nil {
		for k, v := range tr.Result.Vars {
			out[k] = v
		}
	}
	out["changed"] = tr.Status == report.Changed
	out["failed"] = tr.Status == report.Failed || tr.Status == report.Unreachable
	out["skipped"] = tr.Status == report.Skipped
	if tr.Msg != "" {
		out["msg"] = tr.Msg
	}
	if tr.Status == report.Skipped {
		out["skip_reason"] = tr.Msg
	}
	if (tr.Result == nil || tr.Result.ItemValues == nil) && tr.Plan != nil {
		// A loop that applied nothing (or was only planned): its
		// items, each changed as planned.
		if lp := tr.Plan; lp.ItemValues != nil {
			results := make([]any, 0, len(lp.ItemValues))
			for i, it := range lp.ItemValues {
				ch := i < len(lp.Items) && lp.Items[i].Changed() && tr.Status == report.Changed
				one := map[string]any{}
				if i < len(lp.Items) {
					for k, v := range lp.Items[i].Vars {
						one[k] = v
					}
				}
				one["item"], one["changed"], one["failed"], one["skipped"] = it, ch, false, i < len(lp.Items) && lp.Items[i].Skip != ""
				results = append(results, one)
			}
			out["results"] = results
		}
	}
	if res := tr.Result; res != nil && res.ItemValues != nil {
		// A loop: Ansible's results, one per item.
		results := make([]any, 0, len(res.ItemValues))
		for i, it := range res.ItemValues {
			one := map[string]any{}
			if tr.Plan != nil && i < len(tr.Plan.Items) {
				for k, v := range tr.Plan.Items[i].Vars {
					one[k] = v
				}
			}
			one["item"], one["changed"], one["failed"], one["skipped"] = it, false, false, false
			if i < len(res.Items) && res.Items[i] != nil {
				r := res.Items[i]
				for k, v := range r.Vars {
					one[k] = v
				}
				one["changed"] = r.Changed
				if r.RC != nil {
					one["rc"], one["stdout"], one["stderr"] = *r.RC, r.Stdout, r.Stderr
					one["stdout_lines"], one["stderr_lines"] = lines(r.Stdout), lines(r.Stderr)
				}
			}
			results = append(results, one)
		}
		out["results"] = results
		out["msg"] = "All items completed"
	}
	if res := tr.Result; res != nil && res.RC != nil && res.ItemValues == nil {
		out["rc"] = *res.RC
		out["stdout"] = res.Stdout
		out["stderr"] = res.Stderr
		out["stdout_lines"] = lines(res.Stdout)
		out["stderr_lines"] = lines(res.Stderr)
	}
	return out
}

func lines(s string) []any {
	out := []any{}
	if s == "" {
		return out
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		out = append(out, l)
	}
	return out
}

// judge applies changed_when and failed_when to a result, with the task's
// own result under its register name, and records the result for later
// tasks. It runs after the task ran (or, in check mode, was planned).
func (r *runner) judge(s *hostRun, p *playbook.Play, t *playbook.Task, tr *report.TaskResult) {
	if tr.Status == report.Unreachable || (tr.Status == report.Skipped && len(t.FailedWhen) == 0 && len(t.ChangedWhen) == 0) {
		r.register(s, t, tr)
		return
	}
	if tr.Status != report.Skipped && (len(t.ChangedWhen) > 0 || len(t.FailedWhen) > 0) {
		reg := map[string]any{}
		for k, v := range s.registered {
			reg[k] = v
		}
		if t.Register != "" {
			reg[t.Register] = resultVar(tr)
		}
		vars, verr := taskVars(s.host, p, t, s.facts, reg, r.o)
		if verr != nil {
			tr.Status, tr.Msg = report.Failed, verr.Error()
			r.register(s, t, tr)
			return
		}
		if len(t.FailedWhen) > 0 && !(r.o.Check && tr.Plan != nil && tr.Result == nil && isCommandPlan(tr)) {
			failed, _, err := playbook.Holds(t.FailedWhen, vars)
			switch {
			case err != nil:
				tr.Status, tr.Msg = report.Failed, err.Error()
			case failed:
				tr.Status = report.Failed
				tr.Msg = strings.TrimSpace(tr.Msg + "\nfailed_when is true: " + condSrcs(t.FailedWhen))
			case tr.Status == report.Failed && tr.Result != nil:
				// The module failed but failed_when says it did not
				// (a command's non-zero exit that means "not yet").
				tr.Status = report.Changed
			}
		}
		if len(t.ChangedWhen) > 0 && tr.Status != report.Failed {
			changed, _, err := playbook.Holds(t.ChangedWhen, vars)
			switch {
			case err != nil:
				tr.Status, tr.Msg = report.Failed, err.Error()
			case changed && tr.Status == report.OK:
				tr.Status = report.Changed
			case !changed && tr.Status == report.Changed:
				tr.Status = report.OK
			}
		}
	}
	if tr.Status == report.Failed {
		r.ignoreFailure(s, p, t, tr)
	}
	r.register(s, t, tr)
}

// ignoreFailure marks tr, a failure of t on s, ignored when t ignores
// errors there; a templated ignore_errors that cannot be decided ignores
// nothing, and the failure says why.
func (r *runner) ignoreFailure(s *hostRun, p *playbook.Play, t *playbook.Task, tr *report.TaskResult) {
	ok, err := r.ignoresErrors(s, p, t, s.registered)
	if err != nil {
		tr.Msg = joinMsg(tr.Msg, err.Error())
	}
	tr.Ignored = ok
}

// ignoresErrors says whether a failure of t on s is ignored: its
// ignore_errors, or what its templated ignore_errors gives with the host's
// variables and registered, the results registered so far (or, planning,
// as the plan predicts them). A template that cannot be decided ignores
// nothing, and its error is returned.
func (r *runner) ignoresErrors(s *hostRun, p *playbook.Play, t *playbook.Task, registered map[string]any) (bool, error) {
	if len(t.IgnoreErrorsWhen) == 0 {
		return t.IgnoreErrors, nil
	}
	vars, err := taskVars(s.host, p, t, s.facts, registered, r.o)
	if err == nil {
		var ok bool
		ok, _, err = playbook.Holds(t.IgnoreErrorsWhen, vars)
		if err == nil {
			return ok, nil
		}
	}
	return false, fmt.Errorf("ignore_errors: not decided, so the failure is not ignored: %w", err)
}

func isCommandPlan(tr *report.TaskResult) bool { return tr.Plan != nil && len(tr.Plan.Commands) > 0 }

func condSrcs(cs []*playbook.Cond) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Src
	}
	return strings.Join(out, " and ")
}

func (r *runner) register(s *hostRun, t *playbook.Task, tr *report.TaskResult) {
	if f := factsOf(tr); len(f) > 0 {
		// set_fact: the host's variables from here on, in the same
		// layer as registered results (last write wins, as in Ansible).
		if s.registered == nil {
			s.registered = map[string]any{}
		}
		for k, v := range f {
			s.registered[k] = v
		}
	}
	if t.Register == "" {
		return
	}
	if s.registered == nil {
		s.registered = map[string]any{}
	}
	s.registered[t.Register] = resultVar(tr)
}

// factsOf are the variables a task that succeeded sets on its host
// (module.Plan.Facts; a loop's, item by item).
func factsOf(tr *report.TaskResult) map[string]any {
	if tr.Plan == nil || (tr.Status != report.OK && tr.Status != report.Changed) {
		return nil
	}
	return tr.Plan.Facts
}

// predict is a task's registered result as its plan foresees it, for
// the up-front plan's decisions about later tasks.
func predict(pl *module.Plan) map[string]any {
	out := map[string]any{}
	for k, v := range pl.Vars {
		out[k] = v
	}
	if len(pl.Facts) > 0 {
		out["ansible_facts"] = pl.Facts
	}
	out["changed"], out["failed"], out["skipped"] = pl.Changed(), false, pl.Skip != ""
	if pl.ItemValues != nil {
		// A loop: Ansible's results, one per item, as planned.
		results := make([]any, 0, len(pl.ItemValues))
		for i, it := range pl.ItemValues {
			one := map[string]any{}
			if i < len(pl.Items) {
				for k, v := range pl.Items[i].Vars {
					one[k] = v
				}
				one["changed"], one["skipped"] = pl.Items[i].Changed(), pl.Items[i].Skip != ""
			}
			one["item"], one["failed"] = it, false
			results = append(results, one)
		}
		out["results"] = results
	}
	return out
}
