package module

import "context"

// A module decides what it owns per play, not per module: within one play a
// value another task declares (containerd_settings' registry config_path, the
// runtimes containerd_nvidia manages, the registry mirrors containerd_hosts
// migrates) is that task's to set, so it is never the reason a second task
// refuses a change that reaches it. The runner hands every Check the play it
// runs in through its context; a Check outside a play (explain, a test) gets
// an empty one and decides alone, as before.

// PlayTask is one task of the play a Check runs in, with its arguments as
// rendered for the host being checked.
type PlayTask struct {
	Name   string
	Module string
	Args   Args
}

// Play is the play a Check runs in: the tasks (and handlers) that run on
// the host, in play order (a task its when: skips there is not listed), and
// the index in Tasks of the task being checked, -1 when it is not one of
// them.
type Play struct {
	Tasks []PlayTask
	Self  int
}

// Others are the play's tasks other than the one being checked.
func (p Play) Others() []PlayTask {
	out := make([]PlayTask, 0, len(p.Tasks))
	for i, t := range p.Tasks {
		if i != p.Self {
			out = append(out, t)
		}
	}
	return out
}

type playKey struct{}

// WithPlay returns ctx carrying the play a Check runs in.
func WithPlay(ctx context.Context, p Play) context.Context {
	return context.WithValue(ctx, playKey{}, p)
}

// PlayOf is the play the Check with ctx runs in; the zero Play (no tasks,
// Self -1) outside a runner.
func PlayOf(ctx context.Context) Play {
	if p, ok := ctx.Value(playKey{}).(Play); ok {
		return p
	}
	return Play{Self: -1}
}
