package runner

import (
	"context"
	"fmt"
	"time"

	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
)

// until: runs a command again until its condition holds, as Ansible's
// task executor does: after each attempt (changed_when and failed_when
// judged, the result registered with its attempts), the condition is
// evaluated; false, the command runs again after the delay, at most the
// task's attempts in all; still false after the last, the task fails.
// The task's deadline covers every attempt and delay (timeoutOf), so a
// retried task always ends. Check mode runs no command, so it retries
// nothing.

// again says whether the task runs once more on s after attempt: it
// records the attempts in the registered result, decides the task's
// until, waits the delay, and clears tr for the next attempt. When the
// condition is still false after the last attempt, tr fails.
func (r *runner) again(ctx context.Context, s *hostRun, p *playbook.Play, t *playbook.Task, tr *report.TaskResult, attempt int) bool {
	if len(t.Until) == 0 || tr.Status == report.Unreachable || tr.Status == report.Skipped || ctx.Err() != nil {
		return false
	}
	setAttempts := func(n int) {
		if reg, ok := s.registered[t.Register].(map[string]any); ok && t.Register != "" {
			reg["attempts"] = n
		}
	}
	setAttempts(attempt)
	if t.Attempts <= 1 {
		// retries: 0 allows one attempt, and Ansible's task executor
		// judges until: only when more than one is allowed: the result
		// stands as the command left it.
		return false
	}
	vars, err := taskVars(s.host, p, t, s.facts, s.registered, r.o)
	var holds bool
	if err == nil {
		holds, _, err = playbook.Holds(t.Until, vars)
	}
	switch {
	case err != nil:
		tr.Status, tr.Msg = report.Failed, fmt.Sprintf("until: %v", err)
		r.register(s, t, tr)
		return false
	case holds:
		if attempt > 1 {
			tr.Msg = joinMsg(tr.Msg, fmt.Sprintf("until held after %d attempts", attempt))
		}
		return false
	case attempt >= t.Attempts:
		// Ansible's result then says one attempt less than ran.
		tr.Status = report.Failed
		tr.Msg = joinMsg(tr.Msg, fmt.Sprintf("until: %s still false after %d attempts", condSrcs(t.Until), attempt))
		r.register(s, t, tr)
		setAttempts(attempt - 1)
		return false
	}
	if t.Delay > 0 {
		at(ctx, s, fmt.Sprintf("wait %s before attempt %d of %d (until: %s)", t.Delay, attempt+1, t.Attempts, condSrcs(t.Until)))
		timer := time.NewTimer(t.Delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			tr.Status = report.Failed
			tr.Msg = joinMsg(tr.Msg, fmt.Sprintf("until: stopped waiting before attempt %d: %v", attempt+1, context.Cause(ctx)))
			return false
		}
	}
	tr.Status, tr.Msg, tr.Result, tr.Proofs, tr.Ignored = "", "", nil, nil, false
	return true
}

// joinMsg adds line to msg.
func joinMsg(msg, line string) string {
	if msg == "" {
		return line
	}
	return msg + "\n" + line
}
