package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"nodeconverge/engine/fanout"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/savedplan"
)

// ApplySaved applies a saved plan: on each host, exactly the steps check
// mode planned, after proving that every file the plan was made from is
// still what it was. A host whose files changed since is refused whole and
// the others go on. Steps go through the live runs' apply path (runStep),
// so a failure after a write rolls the host back.
func ApplySaved(ctx context.Context, inv *inventory.Inventory, sp *savedplan.Plan, o Options) (*report.Run, error) {
	o.setDefaults()
	o.Check = false
	limit, err := inv.LimitSet(o.Limit)
	if err != nil {
		return nil, err
	}
	r := newRunner(ctx, inv, o, false)
	work, release := r.workContext(ctx)
	defer release()
	if o.Observer != nil {
		var names []string
		for _, hp := range sp.Hosts {
			names = append(names, hp.Host)
		}
		o.Observer.PlayStart("saved plan "+sp.RunID, names)
	}
	var emit sync.Mutex
	var todo []*savedplan.HostPlan
	for i := range sp.Hosts {
		if hp := &sp.Hosts[i]; limit == nil || limit[hp.Host] {
			todo = append(todo, hp)
		}
	}
	for _, hp := range todo {
		r.run.Touch(hp.Host)
	}
	fanout.Each(o.Forks, todo, func(_ int, hp *savedplan.HostPlan) {
		results := r.applyHost(work, hp)
		// One host's steps print together, not interleaved.
		emit.Lock()
		defer emit.Unlock()
		for _, tr := range results {
			r.run.Add(tr)
			if o.Observer != nil {
				o.Observer.TaskStart(tr.Host+": "+tr.Task, tr.Handler)
				o.Observer.Result(tr)
			}
		}
	})
	r.recordInterrupted()
	// As in Run: locks released and connections closed before the recap.
	r.closeAll()
	r.run.Finished = time.Now().UTC()
	if o.Observer != nil {
		o.Observer.Done(r.run)
	}
	return r.run, nil
}

func (r *runner) applyHost(ctx context.Context, hp *savedplan.HostPlan) []*report.TaskResult {
	one := func(task string, st report.Status, msg string) []*report.TaskResult {
		return []*report.TaskResult{{Play: "saved plan", Task: task, Host: hp.Host, Status: st, Msg: msg}}
	}
	ih, ok := r.inv.Hosts[hp.Host]
	if !ok {
		return one("saved plan", report.Failed, fmt.Sprintf("host %s is not in the inventory", hp.Host))
	}
	if hp.Failed != "" {
		return one("saved plan", report.Failed, "not applied: planning failed on this host ("+hp.Failed+"); make a new plan")
	}
	if len(hp.Steps) == 0 {
		return one("saved plan", report.OK, "nothing planned")
	}
	s := r.state(ih)
	h, err := r.connect(ctx, s, nil)
	if err != nil {
		st := report.Failed
		if r.o.IsUnreachable(err) {
			st = report.Unreachable
		}
		return one("connect", st, err.Error())
	}
	// The lock before the fingerprints, in one round trip: nothing may
	// change the node between their check and the writes.
	if err := r.lockFirst(ctx, s, fingerprintQuery(hp.Fingerprints(), hp.Listings)); err != nil {
		st := report.Failed
		if r.o.IsUnreachable(err) {
			st = report.Unreachable
		}
		return one("connect", st, err.Error())
	}
	if msg, err := stale(ctx, h, hp); err != nil {
		return one("verify fingerprints", report.Failed, err.Error())
	} else if msg != "" {
		res := one("verify fingerprints", report.Failed, "refusing this host, nothing was changed: "+msg)
		res[0].Refused = true
		return res
	}
	// The whole host plan is decoded before its first step is applied: a
	// step that cannot be re-checked refuses the host with nothing written.
	steps := make([]step, len(hp.Steps))
	for i := range hp.Steps {
		st, err := savedStep(&hp.Steps[i])
		if err != nil {
			res := one(hp.Steps[i].Task, report.Failed, "refusing this host, nothing was changed: "+err.Error())
			// The arguments' error may quote them.
			res[0].NoLog = hp.Steps[i].NoLog
			res[0].Refused = true
			return res
		}
		steps[i] = st
	}
	var out []*report.TaskResult
	for i := range hp.Steps {
		st := &hp.Steps[i]
		tr := &report.TaskResult{Play: st.Play, Task: st.Task, Module: st.Module, Host: hp.Host, Handler: st.Handler, Because: st.Because, BaseDir: st.BaseDir, NoLog: st.NoLog}
		if r.stopped() {
			// Interrupted: a host half way through its tasks is
			// rolled back; handlers not started stay owed.
			tr = r.notStarted(tr)
			if !st.Handler {
				r.rollback(ctx, s, tr)
			}
			out = append(out, tr)
			break
		}
		start := time.Now()
		// Each step has the run's deadline, as a live task does.
		tr = r.bounded(ctx, s, tr, r.timeoutOf(steps[i].task), func(ctx context.Context) {
			r.runStep(ctx, s, tr, steps[i])
		})
		tr.Duration = time.Since(start)
		if r.stopped() {
			s.drained = tr
		}
		out = append(out, tr)
		if tr.Status == report.Failed || tr.Status == report.Unreachable {
			break
		}
	}
	// What the steps queued and no later step carried (Host.Later).
	if tr := r.flushHost(ctx, s, "saved plan"); tr != nil {
		out = append(out, tr)
	}
	return out
}

// stale compares the live files, and the matches of the globs the plan
// expanded, with what the plan was made from, in one round trip.
func stale(ctx context.Context, h *node.Host, hp *savedplan.HostPlan) (string, error) {
	d, err := fingerprintDrift(ctx, h, hp.Fingerprints(), hp.Listings, "changed since the plan was made")
	if err != nil {
		return "", fmt.Errorf("read planned files: %w", err)
	}
	return d, nil
}

func short(h string) string {
	switch {
	case h == "":
		return "absent"
	case h == report.ReadDir || len(h) < 12:
		return h
	}
	return "sha256:" + h[:12]
}

// savedStep turns a saved step into a step of the one apply path, with its
// arguments decoded for the re-check; relative paths in them start where
// they started when the plan was made.
func savedStep(st *savedplan.Step) (step, error) {
	m, ok := module.Lookup(st.Module)
	if !ok {
		return step{}, fmt.Errorf("module %q is not registered", st.Module)
	}
	plan := st.Plan
	out := step{task: &playbook.Task{Name: st.Task, Module: st.Module, Notify: st.Notify, Handler: st.Handler, NoLog: st.NoLog}, plan: &plan}
	if st.Handler || isImperative(m) || len(st.Args) == 0 {
		return out, nil
	}
	args := m.NewArgs()
	if err := json.Unmarshal(st.Args, args); err != nil {
		return step{}, fmt.Errorf("saved arguments of %q: %w", st.Task, err)
	}
	if b, ok := args.(interface{ SetBaseDir(string) }); ok && st.BaseDir != "" {
		b.SetBaseDir(st.BaseDir)
	}
	if err := args.Validate(); err != nil {
		return step{}, fmt.Errorf("saved arguments of %q: %w", st.Task, err)
	}
	out.args = args
	return out, nil
}
