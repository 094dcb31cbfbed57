package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/overlay"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
)

// A host's run in apply mode is one plan and one apply path.
//
// The plan: before the first write on a host, every task of the play is
// checked on the files as the earlier tasks would leave them (the check-mode
// overlay); a task that would fail or refuse fails the host with nothing
// written. A saved plan is the same thing made earlier. The apply path,
// shared by live runs and saved plans (runStep): verify the step's files are
// still what it was planned from, apply it, check again. Any failure after
// the host's first write rolls the host's run back (Writer.Rollback).

// step is one task of a host's plan.
type step struct {
	task *playbook.Task
	// args re-check the step after apply; nil when the step cannot be
	// re-checked (a saved plan without arguments).
	args module.Args
	plan *module.Plan
}

// planFailure is a task whose Check failed while planning a host, or,
// without a task, a host that could not be planned: unreachable, or a
// saved plan's host refused (name is then the result's task).
type planFailure struct {
	task *playbook.Task
	err  error
	// name, refused and noLog word a failure without a task: the
	// result's task, whether nothing was written, and whether its
	// message may quote no_log arguments.
	name    string
	refused bool
	noLog   bool
}

// planFrom plans the play's tasks from index from on, each on the files as
// the earlier ones would leave them, and keeps the plans on s. It stops at
// the first task whose Check fails.
func (r *runner) planFrom(ctx context.Context, s *hostRun, p *playbook.Play, from int) *planFailure {
	at(ctx, s, "plan the play")
	ov := overlay.New(transport.ReadOnly(s.h))
	if s.plans == nil {
		s.plans = map[*playbook.Task]*module.Plan{}
	}
	// predicted are the registered results as the plan foresees them.
	predicted := map[string]any{}
	for k, v := range s.registered {
		predicted[k] = v
	}
	if s.planErrs == nil {
		s.planErrs = map[*playbook.Task]error{}
	}
	// unknown are the variables of tasks planned when the host reaches
	// them (their register, the facts they set): a task that reads one
	// is planned then too, never decided without it.
	unknown := map[string]bool{}
	later := func(t *playbook.Task) {
		if t.Register != "" {
			delete(predicted, t.Register)
			unknown[t.Register] = true
		}
		for _, n := range t.Sets {
			delete(predicted, n)
			unknown[n] = true
		}
	}
	for i, t := range p.Tasks[from:] {
		delete(s.plans, t)
		delete(s.planErrs, t)
		if t.Meta != "" {
			// Done by the batch loop; a flush's handlers are planned
			// when they run, and the rest of the play after them.
			continue
		}
		m, ok := lookup(t)
		if !ok {
			return &planFailure{task: t, err: fmt.Errorf("module %q is not registered", t.Module)}
		}
		if !r.blockRuns(s, t) {
			// A rescue runs only after a failure: it is planned when
			// the host reaches it, after the failure.
			later(t)
			continue
		}
		if readsRegistered(t, unknown) {
			later(t)
			continue
		}
		why, args, err := r.decide(s, p, t, predicted)
		switch {
		case err != nil:
			// decide evaluates only a task that reads a registered
			// result, and the predicted results did not do: it reads
			// what only running an earlier command gives. It is
			// planned when the host reaches it.
			later(t)
			continue
		case why != "":
			if t.Register != "" && why != quietSkip {
				predicted[t.Register] = map[string]any{"changed": false, "failed": false, "skipped": true}
			}
			continue
		}
		r.keepLate(s, t, args)
		at(ctx, s, fmt.Sprintf("plan the play: check task %q", t.Name))
		pl, err := m.Check(r.playCtx(ctx, s, t), ov, args)
		if err == nil {
			// A path rendered from a variable is refused here,
			// before the host's first write (issue 29 item 3).
			err = module.CheckPaths(pl)
		}
		if err != nil {
			ignored, ierr := r.ignoresErrors(s, p, t, predicted)
			if ignored {
				s.planErrs[t] = err
				if t.Register != "" {
					predicted[t.Register] = map[string]any{"changed": false, "failed": true, "skipped": false}
				}
				continue
			}
			if ierr != nil || r.guarded(t) {
				// Whether the failure is ignored is decided when the
				// host reaches the task, with what it registered by
				// then; or a block's rescue or always takes the failure
				// over there (blocks.go). What runs after it is planned
				// then.
				s.planErrs[t] = err
				for _, rest := range p.Tasks[from+i+1:] {
					delete(s.plans, rest)
					delete(s.planErrs, rest)
				}
				return nil
			}
			return &planFailure{task: t, err: err}
		}
		s.plans[t] = pl
		if checkOnlyTask(t) && m.Imperative && pl.Changed() {
			// check_mode: true: a command is not run, as in a check.
			if t.Register != "" {
				predicted[t.Register] = map[string]any{"changed": false, "failed": false, "skipped": true}
			}
			continue
		}
		if pl.Skip == "" && pl.Changed() && !checkOnlyTask(t) {
			// (check_mode: true is reported, never applied.)
			ov.Record(pl.Files)
		}
		if pl.Skip == "" {
			// set_fact: later tasks are planned with the facts set.
			for k, v := range pl.Facts {
				predicted[k] = v
			}
		}
		if t.Register != "" {
			if m.Imperative && pl.Changed() {
				delete(predicted, t.Register)
				unknown[t.Register] = true
			} else {
				predicted[t.Register] = predict(pl)
			}
		}
	}
	return nil
}

// firstNonEmpty is a if it says something, else b.
func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// taskIndex is t's position in p's tasks, or -1.
func taskIndex(p *playbook.Play, t *playbook.Task) int {
	for i, pt := range p.Tasks {
		if pt == t {
			return i
		}
	}
	return -1
}

// baseDir is where t's relative paths start, as playbook.Render sets it.
func baseDir(t *playbook.Task) string {
	if t.Pos.File == "" {
		return ""
	}
	return filepath.Dir(t.Pos.File)
}

// runStep is the one apply path: it performs a planned step on the host
// and proves it converged, and rolls the host's run back when the step
// fails after the run has written to the host.
func (r *runner) runStep(ctx context.Context, s *hostRun, tr *report.TaskResult, st step) {
	for attempt := 1; ; attempt++ {
		r.applyStep(ctx, s, tr, st)
		p := r.playOf[st.task]
		if p != nil {
			// changed_when/failed_when decide before a failure rolls back.
			r.judge(s, p, st.task, tr)
			s.judged = true
		}
		if p == nil || !r.again(ctx, s, p, st.task, tr, attempt) {
			break
		}
	}
	if (tr.Status == report.Failed && !tr.Ignored && (!r.guarded(st.task) || cutShort(ctx))) || tr.Status == report.Unreachable {
		// A failure a block's rescue or always takes over rolls
		// nothing back yet (blocks.go).
		if cutShort(ctx) {
			// Say why the step's context ended, not only that it did.
			tr.Msg = strings.ReplaceAll(tr.Msg, context.Canceled.Error(), context.Cause(ctx).Error())
		}
		r.rollback(ctx, s, tr)
		if cutShort(ctx) {
			r.restore(ctx, s, tr, st)
		}
	}
}

func (r *runner) applyStep(ctx context.Context, s *hostRun, tr *report.TaskResult, st step) {
	t, plan := st.task, st.plan
	tr.Plan = plan
	m, ok := lookup(t)
	if !ok {
		tr.Status, tr.Msg = report.Failed, fmt.Sprintf("module %q is not registered", t.Module)
		return
	}
	h := s.h
	switch {
	case plan.Skip != "":
		tr.Status, tr.Msg = report.Skipped, plan.Skip
		return
	case !plan.Changed() && len(plan.Always) == 0:
		tr.Status = report.OK
		tr.Msg = firstNonEmpty(tr.Msg, plan.Msg)
		if t.Handler {
			// An owed handler with nothing to do has still been served.
			if err := r.clearPending(ctx, s, t.Name); err != nil {
				r.checkErr(tr, err)
			}
		}
		return
	}
	at(ctx, s, "verify the planned files")
	if msg, err := changedSincePlan(ctx, h, plan); err != nil {
		r.checkErr(tr, fmt.Errorf("verify the planned files: %w", err))
		return
	} else if msg != "" {
		tr.Status, tr.Msg = report.Failed, "not applied: "+msg
		return
	}
	w, err := r.owedWriter(s, t, plan)
	if err != nil {
		r.checkErr(tr, err)
		return
	}
	s.wrote = true
	s.enter(phaseApply)
	switch {
	case len(plan.Commands) > 0 && t.NoLog:
		at(ctx, s, "apply: run the command of a no_log task")
	case len(plan.Commands) > 0:
		at(ctx, s, "apply: run "+strings.Join(plan.Commands, "; "))
	default:
		at(ctx, s, "apply")
	}
	res, err := m.Apply(ctx, w, plan)
	tr.Proofs = proofsOf(res, err)
	if err != nil && res != nil && m.Imperative {
		// The command ran and failed: what it did is unknown, as after
		// a success, and its result is what failed_when judges.
		tr.Result = res
		s.ran = append(s.ran, plan.Commands...)
		s.replan = true
	}
	if err != nil {
		r.checkErr(tr, fmt.Errorf("apply: %w", err))
		// A module that rolled the host back itself (a restart whose
		// health gates failed) says what it restored: the report's
		// rolled_back is every path restored, not only the runner's.
		var rb interface{ RolledBackPaths() []string }
		if errors.As(err, &rb) {
			tr.RolledBack = append(tr.RolledBack, rb.RolledBackPaths()...)
		}
		if ow, ok := w.(*owingWriter); ok && ow.rolled {
			tr.Msg += fmt.Sprintf("\nthe rollback covered run %s, which owed this handler: ", ow.owing)
			if len(ow.restored) == 0 {
				tr.Msg += "it had no file changes left to undo"
			} else {
				tr.Msg += "restored " + strings.Join(ow.restored, ", ")
			}
		}
		return
	}
	tr.Result = res
	tr.Status = report.Changed
	tr.Msg = firstNonEmpty(tr.Msg, plan.Msg)
	if !plan.Changed() {
		// Only Always commands ran (daemon-reload): not a change.
		tr.Status = report.OK
	}
	if t.Handler {
		// A handler that ran clears what was owed; a failed one leaves
		// the record for the next run.
		if err := r.clearPending(ctx, s, t.Name); err != nil {
			r.checkErr(tr, err)
			return
		}
	}
	if m.ImperativePlan != nil && m.ImperativePlan(plan) {
		// Its effect is the same on every run (touch): nothing to
		// re-check, nothing unknown left behind.
		return
	}
	if m.Imperative {
		// What a command did is unknown: the rest of the play is
		// planned again, on the node as it is now, before its next write.
		if t.NoLog {
			// Later tasks' messages list what ran: not this.
			s.ran = append(s.ran, fmt.Sprintf("the command of no_log task %q", t.Name))
		} else {
			s.ran = append(s.ran, plan.Commands...)
		}
		s.replan = true
		return
	}
	if st.args == nil {
		tr.Msg = "applied; not re-checked: the saved plan has no arguments for this step"
		return
	}
	at(ctx, s, "re-check after apply")
	again, err := m.Check(r.playCtx(ctx, s, t), transport.ReadOnly(h), st.args)
	if err != nil {
		r.checkErr(tr, fmt.Errorf("re-check after apply: %w", err))
		return
	}
	if again.Changed() {
		var left []string
		for _, f := range again.Files {
			left = append(left, string(f.Action)+" "+f.Path)
		}
		left = append(left, again.Commands...)
		sort.Strings(left)
		tr.Status = report.Failed
		tr.Msg = "did not converge: after apply, check still plans " + strings.Join(left, ", ")
	}
}

// clearPending marks an owed handler as run. Its record is removed by the
// lock's release (NodeLock.Release), in the round trip that ends the run on
// the host, not in one of its own; without a lock (none is taken in check
// mode, which runs no handler) it is removed now.
func (r *runner) clearPending(ctx context.Context, s *hostRun, handler string) error {
	if s.lock == nil {
		if _, err := s.h.Apply(ctx, []transport.Op{node.ClearPendingOp(s.h.StateDir(), handler)}); err != nil {
			return fmt.Errorf("clear pending %q: %w", handler, err)
		}
	} else {
		if s.clear == nil {
			s.clear = map[string]bool{}
		}
		s.clear[handler] = true
	}
	delete(s.pending, handler)
	if s.served == nil {
		s.served = map[string]bool{}
	}
	s.served[handler] = true
	return nil
}

// changedSincePlan compares the files a step changes with the content it
// was planned from (the previous steps' planned results, or the live node
// for the first step touching a path). A node that differs, because a
// command of the play or someone else changed it, must not get a plan made
// for other files. Creates are not compared: a create's plan carries no
// content to compare with, and the re-check proves its result.
func changedSincePlan(ctx context.Context, h transport.Reader, plan *module.Plan) (string, error) {
	want := map[string]string{}
	// Only a path's first change speaks for the live node: a loop's
	// later items (lineinfile adding a second line) were planned on the
	// earlier items' result.
	seen := map[string]bool{}
	for _, f := range plan.Files {
		p := f.Path
		if f.Action == module.Move {
			p = f.From
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		switch f.Action {
		case module.Update, module.Delete, module.Move:
			want[p] = f.BeforeHash
		}
	}
	if len(want) == 0 {
		return "", nil
	}
	return fingerprintDrift(ctx, h, want, nil, "is not what the plan was made from")
}

// fingerprintDrift reads the files of want (path -> fingerprint of what a
// plan was made from: SHA-256 of the content, "" for absent,
// report.ReadDir for a directory) and expands the globs of globs (pattern
// -> its matches then) in one round trip, and describes each one that
// differs now, joined by "; "; "" when none does. Live steps and saved
// plans both decide staleness with it.
func fingerprintDrift(ctx context.Context, h transport.Reader, want map[string]string, globs map[string][]string, differs string) (string, error) {
	q := fingerprintQuery(want, globs)
	paths, pats := q.Files, q.Globs
	snap, err := h.Query(ctx, q)
	if err != nil {
		return "", err
	}
	var changed []string
	for _, g := range pats {
		was, now := sortedMatches(globs[g]), sortedMatches(snap.Globs[g])
		if strings.Join(was, "\n") != strings.Join(now, "\n") {
			changed = append(changed, fmt.Sprintf("%s %s (matched %s, now %s)", g, differs, matchList(was), matchList(now)))
		}
	}
	for _, p := range paths {
		if got := fingerprint(snap.File(p)); got != want[p] {
			changed = append(changed, fmt.Sprintf("%s %s (planned from %s, now %s)", p, differs, short(want[p]), short(got)))
		}
	}
	return strings.Join(changed, "; "), nil
}

// fingerprintQuery is fingerprintDrift's read, in a fixed order so that an
// earlier read of the same (lockFirst's) answers it from the cache.
func fingerprintQuery(want map[string]string, globs map[string][]string) transport.Query {
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	pats := make([]string, 0, len(globs))
	for g := range globs {
		pats = append(pats, g)
	}
	sort.Strings(pats)
	return transport.Query{Files: paths, Globs: pats}
}

// matchList words a glob's matches for a message.
func matchList(m []string) string {
	if len(m) == 0 {
		return "nothing"
	}
	return strings.Join(m, ", ")
}

// rollback undoes the host's run after a failure that came after the run
// wrote to the host, and says so in tr. Pending records are not undone
// (Rollback never touches the state directory); a handler that already
// ran in this run gets its record back, since the daemon it restarted
// loaded files that are now gone.
func (r *runner) rollback(ctx context.Context, s *hostRun, tr *report.TaskResult) {
	if !s.wrote || s.h == nil {
		return
	}
	s.wrote = false
	// Queued writes never reached the node; the rollback may run over a
	// fresh connection (rollbackContext), and they must not follow it.
	s.h.DiscardQueued()
	at(ctx, s, "roll back")
	ctx, done, err := r.rollbackContext(ctx, s)
	if err != nil {
		tr.Msg = strings.TrimRight(tr.Msg, "\n") + "\nROLLBACK FAILED: " + err.Error()
		return
	}
	defer done()
	paths, err := s.h.Rollback(ctx)
	tr.RolledBack = append(tr.RolledBack, paths...)
	var b strings.Builder
	switch {
	case err != nil:
		fmt.Fprintf(&b, "ROLLBACK FAILED: %v", err)
		if len(paths) > 0 {
			fmt.Fprintf(&b, " (restored %s)", strings.Join(paths, ", "))
		}
	case len(paths) == 0:
		b.WriteString("rolled back this host's run: no file changes were left to undo")
	default:
		fmt.Fprintf(&b, "rolled back this host's run: restored %s", strings.Join(paths, ", "))
	}
	if len(s.ran) > 0 {
		fmt.Fprintf(&b, "; what commands did is not undone (ran: %s)", strings.Join(s.ran, "; "))
	}
	if err := r.reowe(ctx, s); err != nil {
		fmt.Fprintf(&b, "; %v", err)
	}
	if msg := strings.TrimRight(tr.Msg, "\n"); msg != "" {
		tr.Msg = msg + "\n" + b.String()
	} else {
		tr.Msg = b.String()
	}
}

// reowe records again the handlers this run notified and already served:
// after a rollback the node owes them once more.
func (r *runner) reowe(ctx context.Context, s *hostRun) error {
	var names []string
	for hn := range s.served {
		if _, ok := s.owed[hn]; ok {
			names = append(names, hn)
		}
	}
	sort.Strings(names)
	var ops []transport.Op
	for _, hn := range names {
		op, err := node.PendingOp(s.h.StateDir(), node.PendingRecord{Handler: hn, RunID: r.o.RunID, Files: s.owed[hn], Since: time.Now().UTC()})
		if err != nil {
			return fmt.Errorf("record pending handlers again: %w", err)
		}
		ops = append(ops, op)
		delete(s.clear, hn)
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := s.h.Apply(ctx, ops); err != nil {
		return fmt.Errorf("record pending handlers %s again: %w", strings.Join(names, ", "), err)
	}
	return nil
}
