package runner

import (
	"context"

	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// meta does a meta: task on the hosts hs of the batch's active ones:
// flush_handlers runs the handlers notified so far there (and those owed
// by earlier runs), as Ansible's does mid-play, and forgets their
// notifications; the rest of the play is planned again on each of them,
// after what the handlers did. noop does nothing. It returns the hosts
// still in and how many failed (a failed handler fails its host, as at
// the batch's end).
func (r *runner) meta(ctx context.Context, p *playbook.Play, t *playbook.Task, active, hs []*hostRun, notified map[string]map[string][]string, become *bool) ([]*hostRun, int) {
	if t.Meta != "flush_handlers" {
		return active, 0
	}
	hs, failed := r.flushing(ctx, p, t, hs)
	failed += r.flushHandlers(ctx, p, hs, notified, become)
	for _, s := range hs {
		for _, who := range notified {
			delete(who, s.host.Name)
		}
		s.replan = true
	}
	var still []*hostRun
	for _, s := range active {
		if !s.out {
			still = append(still, s)
		}
	}
	return still, failed
}

// flushing is the hosts of hs where a flush_handlers task's when: holds:
// Ansible's strategy decides it per host, and where it is false the
// handlers wait for the batch's end (a meta task is not counted in the
// recap, skipped or not). A when: that cannot be decided fails its host,
// as a task's does; the number of such failures is returned too.
func (r *runner) flushing(ctx context.Context, p *playbook.Play, t *playbook.Task, hs []*hostRun) ([]*hostRun, int) {
	var out []*hostRun
	failed := 0
	for _, s := range hs {
		why, _, err := r.decide(s, p, t, s.registered)
		switch {
		case err != nil:
			tr := &report.TaskResult{Play: p.Name, Task: t.Name, Module: t.Module, Host: s.host.Name, Status: report.Failed, Msg: err.Error()}
			tr.Rescued = r.rescues(t)
			if !r.catch(s, t, tr) {
				r.rollback(ctx, s, tr)
				s.out = true
				failed++
			}
			r.run.Add(tr)
			if r.o.Observer != nil {
				r.o.Observer.Result(tr)
			}
		case why == "":
			out = append(out, s)
		}
	}
	return out, failed
}
