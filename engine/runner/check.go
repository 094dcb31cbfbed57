package runner

import (
	"context"
	"fmt"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
	"strings"
)

// playTally is a play's failures so far in a check run, over every group
// of hosts, and why it stopped, if it did.
type playTally struct {
	failed, size int
	stopped      string
}

// checkInGroups runs a check in groups of -f hosts, each group through
// every play before the next group starts, each host retired (connection
// closed, report handed to the sink, state dropped) as its group ends: a
// fleet-wide drift run holds -f hosts, not the fleet. A check writes
// nothing, so running a group through every play before the next one
// starts changes no outcome, only the order of the output (each group
// prints its own PLAY header, as a serial batch does). max_fail_percentage
// still counts over the whole play (playTally).
// order is checkOrder's.
func (r *runner) checkInGroups(ctx context.Context, plays []*playbook.Play, order []*inventory.Host) {
	for start := 0; start == 0 || start < len(order); start += r.o.Forks {
		group := order[start:min(start+r.o.Forks, len(order))]
		in := make(map[string]bool, len(group))
		names := make([]string, len(group))
		for i, h := range group {
			in[h.Name] = true
			names[i] = h.Name
		}
		if start > 0 {
			// Preflight rendered these hosts' arguments too, and kept
			// only the first group's.
			d, err := decideHosts(plays, r.targets, r.later, func(n string) bool { return in[n] }, nil, r.o)
			if err != nil {
				r.run.AddError(fmt.Sprintf("decide the tasks of hosts %s: %v", strings.Join(names, ", "), err))
				return
			}
			r.mu.Lock()
			r.undecided = d
			r.mu.Unlock()
		}
		for _, p := range plays {
			if r.stopped() {
				return
			}
			var hs []*inventory.Host
			for _, h := range r.targets[p] {
				if in[h.Name] {
					hs = append(hs, h)
				}
			}
			// A play that targets no host still says so, once.
			if len(hs) > 0 || start == 0 && len(r.targets[p]) == 0 {
				r.play(ctx, p, hs)
			}
		}
		if r.stopped() {
			return
		}
		r.retire(names)
	}
}

// checkOrder is the order a check takes the hosts in: each host once, by
// its first play.
func checkOrder(plays []*playbook.Play, targets map[*playbook.Play][]*inventory.Host) []*inventory.Host {
	var order []*inventory.Host
	seen := map[string]bool{}
	for _, p := range plays {
		for _, h := range targets[p] {
			if !seen[h.Name] {
				seen[h.Name] = true
				order = append(order, h)
			}
		}
	}
	return order
}

// checkTask plans one task in check mode, on the files as the earlier
// tasks would leave them, and records what it would write.
func (r *runner) checkTask(ctx context.Context, tr *report.TaskResult, s *hostRun, t *playbook.Task, m *module.Registration, args module.Args) {
	tr.BaseDir = baseDir(t)
	plan, err := m.Check(r.playCtx(ctx, s, t), s.plan, args)
	if err == nil {
		// The same rule as apply's plan, so check mode never plans a
		// write that apply refuses.
		err = module.CheckPaths(plan)
	}
	if err != nil {
		r.checkErr(tr, err)
		return
	}
	if checkResult(tr, t, m, plan) {
		s.plan.Record(plan.Files)
	}
}

// checkResult reports a task's plan as check mode does: what it would
// change, never run; it says whether the plan writes files later tasks
// of a check must see.
func checkResult(tr *report.TaskResult, t *playbook.Task, m *module.Registration, plan *module.Plan) bool {
	tr.Plan = plan
	tr.Msg = plan.Msg
	switch {
	case plan.Skip != "":
		tr.Status, tr.Msg = report.Skipped, plan.Skip
	case !plan.Changed():
		tr.Status = report.OK
	case m.Imperative:
		tr.Status = report.Skipped
		switch {
		case len(plan.Restart) > 0:
			tr.Msg = "check mode restarts nothing; it would restart " + strings.Join(plan.Restart, ", ")
		case t.CheckMode != nil && !*t.CheckMode:
			// Ansible runs it: nodeconverge's check mode runs no
			// command, whatever the task says.
			tr.Msg = "check mode does not run commands, check_mode: false or not (nodeconverge cannot know a command only reads); it would run: " + strings.Join(plan.Commands, "; ")
		default:
			tr.Msg = "check mode does not run commands; it would run: " + strings.Join(plan.Commands, "; ")
		}
	default:
		tr.Status = report.Changed
		return true
	}
	return false
}

// checkOnly is a task with check_mode: true in an apply: it is planned on
// the node as the run left it and reported as check mode reports it,
// never applied (Ansible runs it in check mode whatever the run's mode).
func (r *runner) checkOnly(ctx context.Context, tr *report.TaskResult, s *hostRun, t *playbook.Task, m *module.Registration, args module.Args) {
	tr.BaseDir = baseDir(t)
	plan := s.plans[t]
	if plan == nil {
		var err error
		plan, err = m.Check(r.playCtx(ctx, s, t), transport.ReadOnly(s.h), args)
		if err == nil {
			err = module.CheckPaths(plan)
		}
		if err != nil {
			r.checkErr(tr, err)
			return
		}
	}
	checkResult(tr, t, m, plan)
}

// checkOnlyTask says t runs in check mode whatever the run's mode.
func checkOnlyTask(t *playbook.Task) bool { return t.CheckMode != nil && *t.CheckMode }
