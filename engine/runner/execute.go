package runner

import (
	"context"
	"errors"
	"fmt"
	"nodeconverge/engine/module"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
	"strings"
)

// execute runs task t on one host: connect, lock and read ahead (the
// host's first task of the play), then plan it (check mode) or take the
// host's plan of it and apply it through the one apply path (runStep).
func (r *runner) execute(ctx context.Context, tr *report.TaskResult, s *hostRun, t *playbook.Task, args module.Args, become *bool) {
	fail := func(st report.Status, err error) {
		tr.Status = st
		tr.Msg = err.Error()
	}
	h, err := r.connect(ctx, s, become)
	if err != nil {
		if r.o.IsUnreachable(err) {
			fail(report.Unreachable, err)
		} else {
			fail(report.Failed, err)
		}
		return
	}
	if err := r.prefetch(ctx, s, t); err != nil {
		if r.o.IsUnreachable(err) {
			fail(report.Unreachable, err)
		} else {
			fail(report.Failed, err)
		}
		return
	}
	m, ok := lookup(t)
	if !ok {
		fail(report.Failed, fmt.Errorf("module %q is not registered", tr.Module))
		return
	}
	if r.o.Check {
		at(ctx, s, "check")
		r.checkTask(ctx, tr, s, t, m, args)
		return
	}
	if checkOnlyTask(t) {
		at(ctx, s, "check (check_mode: true)")
		r.checkOnly(ctx, tr, s, t, m, args)
		return
	}
	tr.BaseDir = baseDir(t)
	st, ok, undo := r.stepOf(ctx, tr, s, h, t, m, args)
	switch {
	case ok:
		r.runStep(ctx, s, tr, st)
	case undo && (!r.guarded(blameOf(s, t)) || cutShort(ctx)):
		// A failure after an earlier task's write: the host's run is
		// undone, as after a failed step (unless a block's rescue or
		// always takes the failure over: blocks.go).
		r.rollback(ctx, s, tr)
	}
}

// stepOf is the host's planned step for task t in apply mode: the saved
// step (a saved plan), the handler planned now on the node as the batch
// left it, or the task's part of the host's plan of the play (planned
// again first when a command ran since, or now when the plan could not
// decide it). When there is none it fills tr with why and says whether
// the host's run must be rolled back (it must unless an ignore_errors task
// failed planning).
func (r *runner) stepOf(ctx context.Context, tr *report.TaskResult, s *hostRun, h transport.Writer, t *playbook.Task, m *module.Registration, args module.Args) (st step, ok, undo bool) {
	if t.Handler && r.saved != nil {
		// A saved plan's handler runs as it was planned.
		st, err := r.savedHandler(s, t)
		if err != nil {
			tr.Status, tr.Msg = report.Failed, err.Error()
			return step{}, false, true
		}
		return st, true, false
	}
	if t.Handler {
		// Handlers are planned when they are owed, on the node as the
		// batch left it.
		at(ctx, s, "check the handler")
		plan, err := m.Check(r.playCtx(ctx, s, t), transport.ReadOnly(h), args)
		if err == nil {
			err = module.CheckPaths(plan)
		}
		if err != nil {
			r.checkErr(tr, err)
			return step{}, false, true
		}
		return step{task: t, args: args, plan: plan}, true, false
	}
	p := r.playOf[t]
	// A saved plan is not planned again: each step proves its files are
	// what it was planned from before it writes (runStep).
	if s.replan && r.saved == nil {
		s.replan = false
		if f := r.planFrom(ctx, s, p, taskIndex(p, t)); f != nil {
			r.planFailed(tr, f, fmt.Sprintf("planned again after %s ran, on the node as it is now:", quoteList(s.ran)))
			s.blame = f.task
			return step{}, false, true
		}
	}
	if err, ok := s.planErrs[t]; ok {
		// Its ignore_errors let the plan go past it.
		r.checkErr(tr, err)
		return step{}, false, false
	}
	if s.plans[t] == nil {
		// A task that reads a registered result the up-front plan could
		// not foresee is planned now, on the node as it is.
		if f := r.planFrom(ctx, s, p, taskIndex(p, t)); f != nil {
			r.planFailed(tr, f, "planned when the host reached it:")
			s.blame = f.task
			return step{}, false, true
		}
		if err, ok := s.planErrs[t]; ok {
			r.checkErr(tr, err)
			return step{}, false, false
		}
	}
	plan := s.plans[t]
	if plan == nil {
		tr.Status, tr.Msg = report.Failed, "internal error: the task was not planned on this host"
		return step{}, false, true
	}
	return step{task: t, args: args, plan: plan}, true, false
}

// planFailed reports a task that would fail on the planned state as the
// host's failure: lead says when, the task is named with why.
func (r *runner) planFailed(tr *report.TaskResult, f *planFailure, lead string) {
	tr.Task, tr.Module, tr.Args, tr.Notify, tr.BaseDir = f.task.Name, f.task.Module, r.argsOf(f.task, r.hosts[tr.Host]), f.task.Notify, baseDir(f.task)
	tr.NoLog = f.task.NoLog
	tr.Plan = nil
	r.checkErr(tr, f.err)
	tr.Msg = fmt.Sprintf("%s task %q (%s) would fail: %s", lead, f.task.Name, f.task.Module, tr.Msg)
}

func quoteList(cmds []string) string {
	q := make([]string, len(cmds))
	for i, c := range cmds {
		q[i] = fmt.Sprintf("%q", c)
	}
	return strings.Join(q, ", ")
}

func (r *runner) checkErr(tr *report.TaskResult, err error) {
	tr.Msg = err.Error()
	tr.Status = report.Failed
	if r.o.IsUnreachable(err) {
		tr.Status = report.Unreachable
	}
	var ve *module.ValidationError
	if errors.As(err, &ve) && tr.Plan == nil {
		tr.Plan = &module.Plan{Evidence: ve.Evidence}
	}
}
