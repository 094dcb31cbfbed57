package runner

import (
	"context"
	"fmt"
	"math"
	"nodeconverge/engine/fanout"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"strings"
	"time"
)

// play is the one batch loop, for live runs, checks and saved plans: the
// play's hosts in serial batches (a check: one batch), each batch planned
// on every host before its first write, then the tasks in linear order,
// the batch's handlers, the writes no round trip carried, and (--check
// --prove) the proofs; max_fail_percentage, or every host of a batch
// failing, stops it, and the hosts it never reached are marked not
// attempted.
func (r *runner) play(ctx context.Context, p *playbook.Play, hosts []*inventory.Host) {
	// A check runs a play group by group (checkInGroups): its failures
	// count over the whole play, and a play stopped in an earlier group
	// is not started on the next.
	var tally *playTally
	if r.o.Check {
		tally = r.tally[p]
		if tally.stopped != "" {
			r.notAttempted(p, hosts, [][]int{indexes(len(hosts))}, tally.stopped)
			return
		}
	}
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
		r.run.Touch(h.Name)
	}
	if r.o.Observer != nil {
		r.o.Observer.PlayStart(p.Name, names)
	}
	become := p.Become
	batches := p.Batches(len(hosts))
	if r.o.Check {
		// serial exists so a bad change stops before it reaches every
		// node; check mode changes nothing, so a drift run plans every
		// host at once (max_fail_percentage still applies).
		batches = [][]int{indexes(len(hosts))}
	}
	for bi, batch := range batches {
		if r.stopped() {
			return
		}
		var active []*hostRun
		for _, i := range batch {
			s := r.state(hosts[i])
			if !s.out {
				active = append(active, s)
			}
		}
		if len(active) == 0 {
			continue
		}
		for _, s := range active {
			s.cut = false
		}
		size := len(active)
		notified := map[string]map[string][]string{} // handler -> host -> because
		failedInBatch := 0
		if tally != nil {
			size, failedInBatch = tally.size, tally.failed
		}
		stopped := false
		if !r.o.Check && len(p.Tasks) > 0 {
			// Every task of the play is planned on every host of the
			// batch before the first write on any of them: a host whose
			// plan fails is left as it was, and a batch above
			// max_fail_percentage is not written at all.
			var refused int
			active, refused = r.planBatch(ctx, p, active, become)
			failedInBatch += refused
			if msg := failLimit(p, failedInBatch, size); msg != "" {
				r.run.AddError(fmt.Sprintf("play %q: %s (nothing was written on this batch)", p.Name, msg))
				r.notAttempted(p, hosts, batches[bi+1:], fmt.Sprintf("play %q stopped in batch %d: %s", p.Name, bi+1, msg))
				return
			}
		}
		var prev *playbook.Task
		for ti, t := range p.Tasks {
			if len(active) == 0 {
				break
			}
			if r.stopped() {
				// A host half way through the play is the partial
				// converge the plan exists to prevent; handlers not
				// started stay owed on the node.
				if ti > 0 {
					r.rollbackUnfinished(ctx, p, active, "the run was "+r.interruption()+" before this host ran every task")
				}
				return
			}
			var failedHere int
			active, failedHere = r.leaveBlocks(ctx, prev, t, active)
			failedInBatch += failedHere
			prev = t
			// A host that failed leaving its blocks counts before t
			// starts, as Ansible counts it with its always's last
			// result.
			if active, stopped = r.overLimit(ctx, p, failedInBatch, size, active, true); stopped {
				break
			}
			// A block's rescue runs only where one of its tasks failed,
			// its tasks only where none did yet (blocks.go).
			var hs []*hostRun
			for _, s := range active {
				if r.blockRuns(s, t) {
					hs = append(hs, s)
				}
			}
			if len(hs) == 0 {
				continue
			}
			if t.Meta == "flush_handlers" || t.Meta == "noop" {
				var failedHere int
				active, failedHere = r.meta(ctx, p, t, active, hs, notified, become)
				failedInBatch += failedHere
				if active, stopped = r.overLimit(ctx, p, failedInBatch, size, active, ti < len(p.Tasks)-1); stopped {
					break
				}
				continue
			}
			results := r.runTask(ctx, p, t, hs, become, nil)
			still := make([]*hostRun, 0, len(active))
			for _, s := range active {
				if !r.blockRuns(s, t) {
					still = append(still, s)
				}
			}
			for i, tr := range results {
				switch tr.Status {
				case report.Failed, report.Unreachable:
					if tr.Ignored {
						still = append(still, hs[i])
						continue
					}
					if tr.Status == report.Failed && r.catch(hs[i], blameOf(hs[i], t), tr) {
						still = append(still, hs[i])
						continue
					}
					hs[i].out = true
					if countsAsFailure(tr, hs[i]) {
						failedInBatch++
					}
					continue
				case report.Changed:
					why := fmt.Sprintf("%q changed", t.Name)
					// A no_log task's paths are its arguments.
					if tr.Plan != nil && len(tr.Plan.Files) > 0 && !t.NoLog {
						var paths []string
						for _, f := range tr.Plan.Files {
							paths = append(paths, f.Path)
						}
						why += " " + strings.Join(paths, ", ")
					}
					for _, hn := range t.Notify {
						if notified[hn] == nil {
							notified[hn] = map[string][]string{}
						}
						notified[hn][tr.Host] = append(notified[hn][tr.Host], why)
					}
				}
				still = append(still, hs[i])
			}
			active = inOrder(active, still)
			if active, stopped = r.overLimit(ctx, p, failedInBatch, size, active, ti < len(p.Tasks)-1); stopped {
				break
			}
		}
		if !stopped && !r.stopped() {
			// The play's last blocks end: a failure an always ran for
			// fails its host now.
			var failedHere int
			active, failedHere = r.leaveBlocks(ctx, prev, nil, active)
			failedInBatch += failedHere
			active, stopped = r.overLimit(ctx, p, failedInBatch, size, active, false)
		}
		// Handlers run even after a max_fail stop on the hosts that are
		// still in: a restart owed for a written file must not be lost. A
		// failed handler (a restart that failed its health gates) counts
		// like a failed task: it is what stops a rolling restart. After an
		// interruption none starts: they stay owed on the node.
		if r.stopped() {
			var cut, whole []*hostRun
			for _, s := range active {
				if s.cut {
					cut = append(cut, s)
				} else {
					whole = append(whole, s)
				}
			}
			r.rollbackUnfinished(ctx, p, cut, "the run was "+r.interruption()+" before this host ran every task")
			// A host that ran every task keeps its changes, its
			// handlers owed: what its tasks queued is written.
			r.flushQueued(ctx, p, whole)
			return
		}
		failedInBatch += r.flushHandlers(ctx, p, active, notified, become)
		failedInBatch += r.flushQueued(ctx, p, active)
		failedInBatch += r.prove(ctx, p, active)
		var still []*hostRun
		for _, s := range active {
			if !s.out {
				still = append(still, s)
			}
		}
		active = still
		if msg := failLimit(p, failedInBatch, size); msg != "" && !stopped {
			r.run.AddError(fmt.Sprintf("play %q: %s", p.Name, msg))
			stopped = true
		}
		// The batch is done with these hosts for this play: what the run
		// read of them is not needed again (a fleet's dumps add up), and
		// a host whose last play this is is done.
		var done []string
		for _, i := range batch {
			if st := r.state(hosts[i]); st.h != nil {
				st.h.Refresh()
				st.prefetched = nil
				st.plans = nil
			}
			if r.last[hosts[i].Name] == p {
				done = append(done, hosts[i].Name)
			}
		}
		if tally != nil {
			tally.failed = failedInBatch
			if stopped {
				tally.stopped = fmt.Sprintf("play %q stopped (max_fail_percentage) before this host's group", p.Name)
			}
		}
		r.retire(done)
		if stopped {
			r.notAttempted(p, hosts, batches[bi+1:], fmt.Sprintf("play %q stopped in batch %d (max_fail_percentage)", p.Name, bi+1))
			return
		}
		if len(active) == 0 && bi < len(batches)-1 && failedInBatch > 0 {
			r.run.AddError(fmt.Sprintf("play %q: every host of batch %d failed; stopping before the next batch is touched", p.Name, bi+1))
			r.notAttempted(p, hosts, batches[bi+1:], fmt.Sprintf("play %q stopped after every host of batch %d failed", p.Name, bi+1))
			return
		}
	}
}

// flushQueuedTask names the step that writes what a play's tasks queued
// when no later round trip carried it, in the output of a failure.
const flushQueuedTask = "write the changes of earlier tasks"

// flushQueued sends what the play's tasks queued on each host (Host.Later)
// and no round trip carried: a handler's restart normally does, and then
// this costs nothing and says nothing. A host whose writes fail there is
// rolled back and fails; it returns how many did. After an interruption it
// runs with the run's grace, as a step in flight does: the writes belong to
// tasks already reported done.
func (r *runner) flushQueued(ctx context.Context, p *playbook.Play, hs []*hostRun) (failed int) {
	var q []*hostRun
	for _, s := range hs {
		if hasQueued(s) {
			q = append(q, s)
		}
	}
	if len(q) == 0 {
		return 0
	}
	results := make([]*report.TaskResult, len(q))
	fanout.Each(r.o.Forks, q, func(i int, s *hostRun) {
		results[i] = r.flushHost(ctx, s, p.Name)
	})
	started := false
	for _, tr := range results {
		if tr == nil {
			continue
		}
		failed++
		r.run.Add(tr)
		if r.o.Observer != nil {
			if !started {
				r.o.Observer.TaskStart(flushQueuedTask, false)
				started = true
			}
			r.o.Observer.Result(tr)
		}
	}
	return failed
}

// planBatch plans every task of the play on each host of the batch, before
// anything is written; it returns the hosts whose plan succeeded and how
// many failed (as max_fail_percentage counts them), and reports each failure under one heading.
func (r *runner) planBatch(ctx context.Context, p *playbook.Play, active []*hostRun, become *bool) ([]*hostRun, int) {
	refusals := make([]*report.TaskResult, len(active))
	fanout.Each(r.o.Forks, active, func(i int, s *hostRun) {
		start := time.Now()
		t := p.Tasks[0]
		tr := &report.TaskResult{Play: p.Name, Task: t.Name, Module: t.Module, Host: s.host.Name, Args: s.args[t], Notify: t.Notify}
		failed := false
		tr = r.bounded(ctx, s, tr, r.planTimeout(p), func(ctx context.Context) {
			if f := r.planHost(ctx, s, p, become); f != nil {
				failed = true
				switch {
				case f.task == nil:
					r.checkErr(tr, f.err)
					if f.name != "" {
						// A saved plan's refusal: no task's.
						tr.Task, tr.Module, tr.Args, tr.Notify, tr.NoLog = f.name, "", nil, nil, f.noLog
					}
				case s.wrote:
					r.planFailed(tr, f, "this play wrote nothing on this host:")
				default:
					r.planFailed(tr, f, "nothing was written on this host:")
				}
				// Planned before the play's first write on the host: a
				// refusal, whatever an earlier play wrote (its rollback
				// says so).
				tr.Refused = (f.task != nil || f.refused) && tr.Status == report.Failed
				// An earlier play of this run may have written.
				r.rollback(ctx, s, tr)
			}
		})
		if failed || s.out {
			tr.Duration = time.Since(start)
			refusals[i] = tr
		}
	})
	var still []*hostRun
	var failed []*report.TaskResult
	counted := 0
	for i, s := range active {
		if refusals[i] == nil {
			still = append(still, s)
			continue
		}
		s.out = true
		failed = append(failed, refusals[i])
		if countsAsFailure(refusals[i], s) {
			counted++
		}
	}
	if len(failed) > 0 {
		if r.o.Observer != nil {
			r.o.Observer.TaskStart("plan every task before the first write", false)
		}
		for _, tr := range failed {
			r.run.Add(tr)
			if r.o.Observer != nil {
				r.o.Observer.Result(tr)
			}
		}
	}
	return still, counted
}

// countsAsFailure says whether a host's failure counts towards
// max_fail_percentage. A host found unreachable before the play wrote to
// it says nothing about the change the play makes, which is what the limit
// guards against: it is reported unreachable and left out, and the play
// goes on with the others (unlike Ansible, where it stops a serial: 1 play
// before anything converged). A host lost after the play wrote to it
// counts: the change may be what lost it.
func countsAsFailure(tr *report.TaskResult, s *hostRun) bool {
	return tr.Status != report.Unreachable || s.playWrote()
}

// indexes is 0..n-1: every host of a play as one batch.
func indexes(n int) []int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}

// notAttempted records, for the recap, the hosts of the batches a stopped
// play did not reach, and why.
func (r *runner) notAttempted(p *playbook.Play, hosts []*inventory.Host, rest [][]int, why string) {
	for _, b := range rest {
		for _, i := range b {
			if s := r.state(hosts[i]); !s.out {
				r.run.NotAttempt(hosts[i].Name, why)
			}
		}
	}
}

// rollbackUnfinished undoes the run on hosts that a stopped play left half
// way through its tasks, and fails them: they did not converge.
func (r *runner) rollbackUnfinished(ctx context.Context, p *playbook.Play, active []*hostRun, why string) []*hostRun {
	var undo []*hostRun
	var kept []*hostRun
	for _, s := range active {
		if s.playWrote() {
			undo = append(undo, s)
		} else {
			kept = append(kept, s)
		}
	}
	if len(undo) == 0 {
		return active
	}
	if r.o.Observer != nil {
		r.o.Observer.TaskStart("roll back hosts the stopped play left half way", false)
	}
	results := make([]*report.TaskResult, len(undo))
	fanout.Each(r.o.Forks, undo, func(i int, s *hostRun) {
		tr := &report.TaskResult{Play: p.Name, Task: "roll back", Host: s.host.Name, Status: report.Failed, Msg: why}
		r.rollback(ctx, s, tr)
		s.out = true
		results[i] = tr
	})
	for _, tr := range results {
		r.run.Add(tr)
		if r.o.Observer != nil {
			r.o.Observer.Result(tr)
		}
	}
	return kept
}

// failLimit says whether the play must stop. Without max_fail_percentage a
// play goes on with the hosts that are left, as Ansible does.
// overLimit stops the play when the batch's failures are past its
// max_fail_percentage, saying so; more says tasks of the play are left,
// and then the hosts that wrote are rolled back: a host stopped half way
// through the play is the partial converge the plan exists to prevent.
// It returns the hosts still in and whether the play stops.
func (r *runner) overLimit(ctx context.Context, p *playbook.Play, failed, size int, active []*hostRun, more bool) ([]*hostRun, bool) {
	msg := failLimit(p, failed, size)
	if msg == "" {
		return active, false
	}
	r.run.AddError(fmt.Sprintf("play %q: %s", p.Name, msg))
	if more {
		active = r.rollbackUnfinished(ctx, p, active, "the play stopped (max_fail_percentage) before this host ran every task")
	}
	return active, true
}

func failLimit(p *playbook.Play, failed, size int) string {
	if p.MaxFailPercentage == nil || size == 0 {
		return ""
	}
	pct := float64(failed) * 100 / float64(size)
	if pct > *p.MaxFailPercentage {
		return fmt.Sprintf("%d of %d hosts failed (%.0f%%), above max_fail_percentage %g; stopping the play", failed, size, math.Round(pct), *p.MaxFailPercentage)
	}
	return ""
}

func (r *runner) flushHandlers(ctx context.Context, p *playbook.Play, active []*hostRun, notified map[string]map[string][]string, become *bool) (failed int) {
	for _, h := range p.Handlers {
		if r.stopped() {
			break
		}
		who := notified[h.Name]
		for _, s := range active {
			if rec, ok := s.pending[h.Name]; ok && !s.out {
				if who == nil {
					who = map[string][]string{}
				}
				who[s.host.Name] = append(who[s.host.Name], fmt.Sprintf("owed since run %s changed %s", rec.RunID, strings.Join(rec.Files, ", ")))
			}
		}
		if len(who) == 0 {
			continue
		}
		var hs []*hostRun
		for _, s := range active {
			if _, ok := who[s.host.Name]; ok && !s.out {
				hs = append(hs, s)
			}
		}
		if len(hs) == 0 {
			continue
		}
		results := r.runTask(ctx, p, h, hs, become, who)
		for _, s := range hs {
			if s.phase >= phaseApply {
				s.enter(phaseHandlers)
			}
		}
		for i, tr := range results {
			if tr.Status == report.Failed || tr.Status == report.Unreachable {
				hs[i].out = true
				failed++
			}
		}
	}
	return failed
}

func (r *runner) runTask(ctx context.Context, p *playbook.Play, t *playbook.Task, hs []*hostRun, become *bool, because map[string][]string) []*report.TaskResult {
	started := r.taskStart(t, len(hs))
	results := make([]*report.TaskResult, len(hs))
	fanout.Each(r.o.Forks, hs, func(i int, s *hostRun) {
		start := time.Now()
		tr := &report.TaskResult{Play: p.Name, Task: t.Name, Module: t.Module, Host: s.host.Name, Handler: t.Handler,
			Args: s.args[t], Notify: t.Notify, NoLog: t.NoLog}
		if because != nil {
			tr.Because = dedupe(because[s.host.Name])
		}
		if len(t.Facts) > 0 && s.facts == nil && playReadsFacts(p) && !r.stopped() {
			var ferr error
			tr = r.bounded(ctx, s, tr, r.timeoutOf(t), func(ctx context.Context) { ferr = r.ensureFacts(ctx, s, t, become) })
			if ferr != nil {
				tr.Status, tr.Msg = report.Failed, ferr.Error()
				if r.o.IsUnreachable(ferr) {
					tr.Status = report.Unreachable
				}
			}
			if tr.Status == report.Failed || tr.Status == report.Unreachable {
				tr.Duration = time.Since(start)
				results[i] = tr
				r.run.Add(tr)
				if r.o.Observer != nil {
					started()
					r.o.Observer.Result(tr)
				}
				return
			}
		}
		why, a, derr := r.decide(s, p, t, s.registered)
		s.judged, s.blame = false, nil
		switch {
		case r.stopped():
			tr = r.notStarted(tr)
			s.cut = true
		case derr != nil:
			tr.Status, tr.Msg = report.Failed, derr.Error()
			r.ignoreFailure(s, p, t, tr)
			r.register(s, t, tr)
		case why == quietSkip || why == "" && t.Meta == "include_role":
			// Not the host's task at all, or an include_role that
			// runs (Ansible counts it nowhere): nothing to report.
			tr.Status = report.Skipped
			results[i] = tr
			return
		case why == "" && t.Meta == "include":
			// An include_tasks that runs: Ansible's "included", ok.
			tr.Status, tr.Msg = report.OK, "included"
		case why != "":
			tr.Status, tr.Msg = report.Skipped, why
			r.register(s, t, tr)
		default:
			r.keepLate(s, t, a)
			tr.Args = a
			tr = r.bounded(ctx, s, tr, r.timeoutOf(t), func(ctx context.Context) {
				r.execute(ctx, tr, s, t, a, become)
			})
			if !s.judged {
				r.judge(s, p, t, tr)
			}
			if r.stopped() {
				s.drained = tr
			}
		}
		if r.save != nil {
			r.save.result(p, t, tr)
		}
		if tr.Status == report.Failed && !tr.Ignored {
			// A failure a block's rescue catches is counted as rescued.
			tr.Rescued = r.rescues(blameOf(s, t))
		}
		tr.Duration = time.Since(start)
		results[i] = tr
		r.run.Add(tr)
		if r.o.Observer != nil {
			started()
			r.o.Observer.Result(tr)
		}
	})
	return results
}
