package runner

import (
	"context"

	"nodeconverge/engine/module"
	"nodeconverge/engine/playbook"
)

// playCtx hands t's Check the play it runs in on the host (module.WithPlay):
// every task and handler of t's play that runs there, with its arguments as
// rendered there, so that a module decides ownership per play (a value
// another task of the play declares is never its reason to refuse). A task
// not yet rendered on the host (it reads a registered result) is left out.
func (r *runner) playCtx(ctx context.Context, s *hostRun, t *playbook.Task) context.Context {
	p := r.playOf[t]
	if p == nil || s == nil {
		return ctx
	}
	play := module.Play{Self: -1}
	for _, pt := range p.AllTasks() {
		a := r.argsOf(pt, s)
		if a == nil {
			continue
		}
		if pt == t {
			play.Self = len(play.Tasks)
		}
		play.Tasks = append(play.Tasks, module.PlayTask{Name: pt.Name, Module: pt.Module, Args: a})
	}
	return module.WithPlay(ctx, play)
}
