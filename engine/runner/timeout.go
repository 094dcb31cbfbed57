package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// Every remote step of a task runs under the task's deadline (the task's
// `timeout:`, else Options.Timeout, else DefaultTimeout), per host. A host
// past it is failed with the task and the step it was at; the transport
// ends the step's remote processes when the deadline cancels the step; the
// host's run is rolled back over a fresh connection (the old one may be
// hung: a stopped sshd session answers nothing), bounded by rollbackGrace;
// and the old connection is closed and never used again. The other hosts
// go on: a task's barrier waits for a hung host at most its timeout plus
// the grace periods, so a run always ends.

// stuckGrace is how long a host's task may go on after its deadline
// before the runner closes its connection: it covers the transport's kill
// of the remote command (5 s over the connection, 15 s over a fresh one)
// and the rollback (rollbackGrace), so only a step that ignores its
// context gets there. abandonGrace is how long it then waits before
// giving up on the step.
const (
	stuckGrace   = 60 * time.Second
	abandonGrace = 10 * time.Second
)

// timeoutError is the cause of a context ended by a task's timeout.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("timed out after %s", e.d) }

// timeoutOf is t's deadline on one host.
func (r *runner) timeoutOf(t *playbook.Task) time.Duration {
	d := r.o.Timeout
	if t.Timeout > 0 {
		d = t.Timeout
	}
	if len(t.Until) > 0 && t.Attempts > 1 {
		// until: each attempt has the task's timeout, and the delays
		// come between them.
		d = time.Duration(t.Attempts)*d + time.Duration(t.Attempts-1)*t.Delay
	}
	return d
}

// planTimeout bounds the planning of a play on one host: planning checks
// every task, each of which must fit its own timeout, so the longest one.
func (r *runner) planTimeout(p *playbook.Play) time.Duration {
	d := r.o.Timeout
	for _, t := range p.Tasks {
		d = max(d, r.timeoutOf(t))
	}
	return d
}

// at records the step the host is at, for a timeout's message; a step
// taken after the deadline (the rollback) is not what timed out.
func at(ctx context.Context, s *hostRun, step string) {
	if ctx.Err() == nil {
		s.doing.Store(&step)
	}
}

// timedOut says whether ctx ended on a task's timeout (not on the run's
// interruption).
func timedOut(ctx context.Context) (*timeoutError, bool) {
	var te *timeoutError
	if errors.As(context.Cause(ctx), &te) {
		return te, true
	}
	return nil, false
}

// bounded runs fn for host s under deadline d and returns the result to
// report: tr, or, when fn would not return after its deadline, a copy
// of tr made before fn started (fn's own copy is then never read again).
func (r *runner) bounded(ctx context.Context, s *hostRun, tr *report.TaskResult, d time.Duration, fn func(context.Context)) *report.TaskResult {
	tctx, cancel := context.WithTimeoutCause(ctx, d, &timeoutError{d: d})
	defer cancel()
	shadow := *tr
	s.doing.Store(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tctx)
	}()
	select {
	case <-done:
	case <-tctx.Done():
		stuck := stuckGrace
		if cutShort(tctx) {
			// Cut short after an interruption, the step rolls back
			// and then starts its service again (each bounded by
			// rollbackGrace): the connection is not hung, only busy.
			stuck += rollbackGrace
		}
		select {
		case <-done:
		case <-time.After(stuck):
			// Closing the connection ends every call still waiting
			// on it.
			r.abandon(s)
			select {
			case <-done:
			case <-time.After(abandonGrace):
				tr = &shadow
				tr.Status = report.Failed
				tr.Msg = fmt.Sprintf("timed out after %s in task %q; the host did not answer and its connection was closed; its run was not rolled back", d, tr.Task)
				s.out, s.wrote = true, false
				return tr
			}
		}
	}
	if te, ok := timedOut(tctx); ok && ctx.Err() == nil && (tr.Status == report.Failed || tr.Status == report.Unreachable) {
		r.failTimedOut(s, tr, te)
	}
	return tr
}

// failTimedOut words a timed-out task's failure and ends the host's part
// in the run: the task already rolled the host back (rollback takes a fresh
// connection after a timeout), and the hung connection is closed.
func (r *runner) failTimedOut(s *hostRun, tr *report.TaskResult, te *timeoutError) {
	doing := "starting"
	if d := s.doing.Load(); d != nil {
		doing = *d
	}
	msg := strings.ReplaceAll(tr.Msg, context.DeadlineExceeded.Error(), te.Error())
	tr.Status = report.Failed
	tr.Msg = fmt.Sprintf("timed out after %s in task %q at step %q; the step's remote processes were ended and the host's connection closed: %s", te.d, tr.Task, doing, msg)
	s.out = true
	r.abandon(s)
}

// abandon closes a host's connection after a timeout: a hung connection
// is not trusted with anything more (the lock release included: the lock
// goes stale when the connection's sshd process ends, and the next run
// takes it over).
func (r *runner) abandon(s *hostRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.abandoned || s.conn == nil {
		return
	}
	s.abandoned = true
	if err := s.conn.Close(); err != nil {
		r.run.AddNote(fmt.Sprintf("%s: close the timed-out connection: %v", s.host.Name, err))
	}
}

// rollbackContext is the context a rollback runs under: ctx when it has a
// deadline (a task's step), else ctx bounded by rollbackGrace; after a
// task's timeout a fresh one bounded by rollbackGrace, over a fresh
// connection to the host (the timed-out one may be hung); after an
// interruption's grace ran out a fresh one bounded by rollbackGrace over
// the same connection. The returned func undoes what it set up.
func (r *runner) rollbackContext(ctx context.Context, s *hostRun) (context.Context, func(), error) {
	if cutShort(ctx) {
		// An interruption's grace ran out: the connection is sound,
		// only the step's context is spent.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackGrace)
		return rctx, cancel, nil
	}
	if _, ok := timedOut(ctx); !ok {
		if _, bounded := ctx.Deadline(); bounded {
			return ctx, func() {}, nil
		}
		// A rollback outside any task's step (a block whose failure no
		// rescue caught, a stopped play, a flush that could not be
		// decided) has no task deadline: it gets the grace, so a node
		// that hangs then cannot stall the run.
		rctx, cancel := context.WithTimeout(ctx, rollbackGrace)
		return rctx, cancel, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackGrace)
	r.abandon(s)
	b := s.host.Conn.Become
	if s.become != nil {
		b = *s.become
	}
	c, err := r.o.Dial(rctx, s.host, b)
	if err != nil {
		cancel()
		return nil, func() {}, fmt.Errorf("reconnect to roll back: %w", err)
	}
	old := s.h
	hopts := r.o.HostOptions
	hopts.RunID = r.o.RunID
	s.h = node.NewHost(c, hopts)
	return rctx, func() {
		cancel()
		s.h = old
		if err := c.Close(); err != nil {
			r.run.AddNote(fmt.Sprintf("%s: close the rollback connection: %v", s.host.Name, err))
		}
	}, nil
}
