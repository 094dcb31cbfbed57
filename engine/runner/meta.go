package runner

import (
	"context"

	"nodeconverge/engine/playbook"
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
	failed := r.flushHandlers(ctx, p, hs, notified, become)
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
