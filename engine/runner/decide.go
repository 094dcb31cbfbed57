package runner

import (
	"errors"
	"fmt"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/playbook"
	"strings"

	"github.com/hashicorp/go-multierror"
)

// decided is what preflight decided for one host: each task's rendered
// arguments, and why a task is skipped there (when: false).
type decided struct {
	args map[*playbook.Task]module.Args
	skip map[*playbook.Task]string
}

// targetsOf selects each play's hosts, -l applied.
func targetsOf(inv *inventory.Inventory, plays []*playbook.Play, o Options) (map[*playbook.Play][]*inventory.Host, error) {
	var errs *multierror.Error
	targets := map[*playbook.Play][]*inventory.Host{}
	limit, err := inv.LimitSet(o.Limit)
	if err != nil {
		return nil, err
	}
	for _, p := range plays {
		hs, err := inv.Select(p.Hosts)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("%s: play %q: %w", p.Pos, p.Name, err))
			continue
		}
		var sel []*inventory.Host
		for _, h := range hs {
			if limit == nil || limit[h.Name] {
				sel = append(sel, h)
			}
		}
		targets[p] = sel
	}
	if err := errs.ErrorOrNil(); err != nil {
		return nil, flatErr(errs)
	}
	return targets, nil
}

// laterTasks are the tasks whose when: or arguments read a variable their
// play registers, or a fact: they are decided when a host reaches them.
func laterTasks(plays []*playbook.Play) map[*playbook.Task]bool {
	later := map[*playbook.Task]bool{}
	gathers := false
	for _, p := range plays {
		gathers = gathers || p.GatherFacts
	}
	for _, p := range plays {
		reg := registeredNames(p)
		for _, t := range p.AllTasks() {
			// A task that reads facts is decided once its host's facts
			// are read (in its first round trip); facts an earlier play
			// gathered stay the host's, as in Ansible.
			if readsRegistered(t, reg) || gathers && len(t.Facts) > 0 {
				later[t] = true
			}
		}
	}
	return later
}

// decideHosts renders every task for every host of in (nil: every target) it
// targets, so a typo in a variable fails the run before any node is
// touched, and evaluates its when: where it reads no registered variable:
// a task skipped on a host is not rendered there. It returns the
// decisions of the hosts keep says to keep (nil: all of them), and every
// error found.
func decideHosts(plays []*playbook.Play, targets map[*playbook.Play][]*inventory.Host, later map[*playbook.Task]bool, in, keep func(string) bool, o Options) (map[string]decided, error) {
	var errs *multierror.Error
	out := map[string]decided{}
	for _, p := range plays {
		for _, t := range p.AllTasks() {
			if later[t] {
				continue
			}
			for _, h := range targets[p] {
				if in != nil && !in(h.Name) {
					continue
				}
				vars, err := taskVars(h, p, t, nil, nil, o)
				if err != nil {
					errs = multierror.Append(errs, fmt.Errorf("host %s: %s: %w", h.Name, t.Pos, err))
					continue
				}
				ok, c, err := playbook.Holds(whenOf(t), vars)
				if err != nil {
					errs = multierror.Append(errs, fmt.Errorf("host %s: %w", h.Name, err))
					continue
				}
				var a module.Args
				if ok {
					a, err = t.Render(vars)
				}
				if err != nil && t.NoLog {
					// The renderer's message may quote the values.
					errs = multierror.Append(errs, fmt.Errorf("host %s: %s: task %q: its arguments do not render or validate (details hidden: no_log: true)", h.Name, t.Pos, t.Name))
					continue
				}
				if err != nil {
					errs = multierror.Append(errs, fmt.Errorf("host %s: %w", h.Name, err))
					continue
				}
				if keep != nil && !keep(h.Name) {
					continue
				}
				d, seen := out[h.Name]
				if !seen {
					d = decided{args: map[*playbook.Task]module.Args{}, skip: map[*playbook.Task]string{}}
					out[h.Name] = d
				}
				if ok {
					d.args[t] = a
				} else {
					d.skip[t] = falseCondition(c)
				}
			}
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return nil, flatErr(errs)
	}
	return out, nil
}

// flatErr prints a multierror as one error per line, without the "N errors
// occurred" banner, since each line already names its file and position.
func flatErr(m *multierror.Error) error {
	if len(m.Errors) == 1 {
		return m.Errors[0]
	}
	lines := make([]string, len(m.Errors))
	for i, e := range m.Errors {
		lines[i] = e.Error()
	}
	return errors.New(strings.Join(lines, "\n"))
}
