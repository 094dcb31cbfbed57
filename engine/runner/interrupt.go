package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"nodeconverge/engine/report"
)

// Interruption (issue 11 #4).
//
// The run's context (Run's ctx: the first SIGINT or SIGTERM ends it) stops
// the run from starting anything new: no batch, task, handler or host step
// starts after it. What is in flight runs on under the work context, which
// ends InterruptGrace after the interruption, or at once when Abort is
// closed (the second signal). A step the work context cuts short fails; the
// host is rolled back and, for a module that can leave a service down (a
// restart between its stop and its start: Registration.Restore), its service is
// started again, each under a fresh context bounded by rollbackGrace. So a
// run ends at most InterruptGrace + 2 x rollbackGrace (+ ending the remote
// command, at most 20 s, and closing its connections) after the first
// signal, and no host's containerd is left stopped by it. bounded waits that
// long for such a step before it gives up on its connection. Hosts a play left half way through its tasks are rolled
// back, as after a max_fail_percentage stop; handlers not yet started are
// not started: their pending records stay on the node, and the next run
// runs them. Each host's state is in the recap (`interrupted: ...`).

// DefaultInterruptGrace is how long a step in flight may go on after the
// run is interrupted: a containerd restart whose gates fail (60 s by
// default), rolled back and restarted, fits.
const DefaultInterruptGrace = 2 * time.Minute

// interruptError is the cause of a work context cut short after an
// interruption.
type interruptError struct{ why string }

func (e *interruptError) Error() string { return e.why }

// workContext is the context steps run under: it ends InterruptGrace
// after stop ends, or when abort is closed after that; its values are
// stop's. The returned func releases it.
func (r *runner) workContext(stop context.Context) (context.Context, func()) {
	work, cancel := context.WithCancelCause(context.WithoutCancel(stop))
	go func() {
		select {
		case <-stop.Done():
		case <-work.Done():
			return
		}
		t := time.NewTimer(r.o.InterruptGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel(&interruptError{why: fmt.Sprintf("cut short %s after the interruption (%v)", r.o.InterruptGrace, context.Cause(stop))})
		case <-r.o.Abort:
			cancel(&interruptError{why: fmt.Sprintf("cut short by a second signal after the interruption (%v)", context.Cause(stop))})
		case <-work.Done():
		}
	}()
	return work, func() { cancel(nil) }
}

// stopped says whether the run was interrupted: nothing new starts.
func (r *runner) stopped() bool { return r.stop != nil && r.stop.Err() != nil }

// interruption words why the run stopped.
func (r *runner) interruption() string {
	if r.stop == nil {
		return "interrupted"
	}
	return fmt.Sprintf("interrupted (%v)", context.Cause(r.stop))
}

// cutShort says whether ctx ended because an interruption's grace ran out.
func cutShort(ctx context.Context) bool {
	var ie *interruptError
	return errors.As(context.Cause(ctx), &ie)
}

// notStarted is the result of a host step the interruption kept from
// starting.
func (r *runner) notStarted(tr *report.TaskResult) *report.TaskResult {
	tr.Status = report.Skipped
	tr.Msg = "not started: the run was " + r.interruption()
	return tr
}

// restore starts again the service a step cut short may have left down,
// after the host was rolled back, and records the state it left.
func (r *runner) restore(ctx context.Context, s *hostRun, tr *report.TaskResult, st step) {
	m, ok := lookup(st.task)
	if !ok || s.h == nil {
		return
	}
	if m.Restore == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackGrace)
	defer cancel()
	state, err := m.Restore(rctx, s.h, st.plan)
	if err != nil {
		s.restored = "service NOT restored: " + err.Error()
	} else {
		s.restored = "service restored: " + state
	}
	tr.Msg = strings.TrimRight(tr.Msg, "\n") + "\n" + s.restored
}

// recordInterrupted puts each host's state after an interruption in the
// run, for the recap and the JSON report.
func (r *runner) recordInterrupted() {
	if !r.stopped() {
		return
	}
	r.run.AddError(fmt.Sprintf("run %s: nothing new was started after it; each host's state is in the recap", r.interruption()))
	for _, name := range r.run.SortedHosts() {
		r.mu.Lock()
		s := r.hosts[name]
		r.mu.Unlock()
		if left, ok := r.left[name]; ok && s == nil {
			r.run.Interrupt(name, left)
			continue
		}
		r.run.Interrupt(name, r.hostLeft(s))
	}
}

// hostLeft words the state an interrupted run left a host in.
func (r *runner) hostLeft(s *hostRun) string {
	if s == nil || s.h == nil {
		return "not started, nothing changed"
	}
	var parts []string
	if d := s.drained; d != nil {
		kind := "task"
		if d.Handler {
			kind = "handler"
		}
		switch d.Status {
		case report.Failed, report.Unreachable:
			parts = append(parts, fmt.Sprintf("%s %q in flight at the signal failed: %s", kind, d.Task, firstLine(d.Msg)))
			if len(d.RolledBack) > 0 {
				parts = append(parts, "rolled back "+strings.Join(d.RolledBack, ", "))
			}
		default:
			msg := string(d.Status)
			if d.Result != nil && d.Result.Msg != "" {
				msg = firstLine(d.Result.Msg)
			}
			parts = append(parts, fmt.Sprintf("%s %q in flight at the signal finished: %s", kind, d.Task, msg))
		}
		if s.restored != "" {
			parts = append(parts, s.restored)
		}
	}
	owed := map[string]bool{}
	for hn := range s.owed {
		if !s.served[hn] {
			owed[hn] = true
		}
	}
	for hn := range s.pending {
		owed[hn] = true
	}
	if len(owed) > 0 {
		names := make([]string, 0, len(owed))
		for hn := range owed {
			names = append(names, fmt.Sprintf("%q", hn))
		}
		sort.Strings(names)
		parts = append(parts, fmt.Sprintf("handler %s owed (recorded on the node; the next run runs it)", strings.Join(names, ", ")))
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing in flight; left as its last finished task left it")
	}
	return strings.Join(parts, "; ")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
