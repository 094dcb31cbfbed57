package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/savedplan"
	"nodeconverge/engine/transport"
)

// A saved plan is applied by the same walk as a live run (Terraform's
// model): its plays in order, each play's hosts in serial batches with its
// max_fail_percentage, handlers at the end of each batch, every step under
// its deadline and the interruption's grace, the recap's not-attempted
// hosts. It differs only where a host's plan comes from: instead of
// planning the play (planFrom), the batch takes the host's saved steps,
// after proving, in the round trip that takes the node lock, that every
// file the plan was made from is still what it was (planSaved).

// savedRun is where the hosts of a saved plan take their plans from.
type savedRun struct {
	hosts map[string]*savedplan.HostPlan
	// steps are each host's saved steps, by the task they plan.
	steps map[string]map[*playbook.Task]step
	// refuse says why a host is refused before anything is read there
	// (its planning failed, a step cannot be decoded), and as what.
	refuse map[string]*planFailure
}

// ApplySaved applies a saved plan: on each host, exactly the steps check
// mode planned, after proving that every file the plan was made from is
// still what it was. A host whose files changed since is refused whole
// (nothing written there), which counts, as a live run's refusal does,
// towards its play's max_fail_percentage. Steps go through the live runs'
// apply path (runStep), so a failure after a write rolls the host back.
func ApplySaved(ctx context.Context, inv *inventory.Inventory, sp *savedplan.Plan, o Options) (*report.Run, error) {
	o.setDefaults()
	o.Check = false
	o.magic = magicVars(inv)
	limit, err := inv.LimitSet(o.Limit)
	if err != nil {
		return nil, err
	}
	plays := savedPlays(sp)
	targets := map[*playbook.Play][]*inventory.Host{}
	var missing []string
	seen := map[string]bool{}
	for i, spp := range sp.Plays {
		p := plays[i]
		targets[p] = nil
		for _, name := range spp.Hosts {
			if limit != nil && !limit[name] {
				continue
			}
			h, ok := inv.Hosts[name]
			if !ok {
				if !seen[name] {
					seen[name] = true
					missing = append(missing, name)
				}
				continue
			}
			targets[p] = append(targets[p], h)
		}
	}
	r := newRunner(ctx, inv, o, false)
	r.setPlays(plays, targets)
	sr := &savedRun{hosts: map[string]*savedplan.HostPlan{}, steps: map[string]map[*playbook.Task]step{}, refuse: map[string]*planFailure{}}
	undecided := map[string]decided{}
	for i := range sp.Hosts {
		hp := &sp.Hosts[i]
		sr.hosts[hp.Host] = hp
		d := decided{args: map[*playbook.Task]module.Args{}, skip: map[*playbook.Task]string{}}
		undecided[hp.Host] = d
		sr.steps[hp.Host] = map[*playbook.Task]step{}
		if hp.Failed != "" {
			sr.refuse[hp.Host] = &planFailure{name: "saved plan", refused: true,
				err: errors.New("not applied: planning failed on this host (" + hp.Failed + "); make a new plan")}
			continue
		}
		for si := range hp.Steps {
			st := &hp.Steps[si]
			t := savedTask(plays, st)
			stp, err := savedStep(st, t)
			if err != nil {
				// The arguments' error may quote them.
				sr.refuse[hp.Host] = &planFailure{name: st.Task, refused: true, noLog: st.NoLog,
					err: errors.New("refusing this host, nothing was changed: " + err.Error())}
				break
			}
			d.args[t] = stp.args
			sr.steps[hp.Host][t] = stp
		}
	}
	r.undecided, r.saved = undecided, sr
	for _, name := range missing {
		r.run.Add(&report.TaskResult{Play: "saved plan", Task: "saved plan", Host: name, Status: report.Failed,
			Msg: fmt.Sprintf("host %s is not in the inventory", name)})
	}
	return r.walk(ctx, plays), nil
}

// savedPlays are the plays of a saved plan as the batch loop walks them.
func savedPlays(sp *savedplan.Plan) []*playbook.Play {
	tasks := func(ts []savedplan.Task, handler bool) []*playbook.Task {
		out := make([]*playbook.Task, len(ts))
		for i, st := range ts {
			t := &playbook.Task{Name: st.Name, Module: st.Module, Notify: st.Notify, NoLog: st.NoLog, Timeout: st.Timeout, Handler: handler}
			if st.Loop {
				// Its module is the loop around the named one (lookup);
				// the items are in each host's step.
				t.Loop = &yaml.Node{Kind: yaml.SequenceNode}
			}
			out[i] = t
		}
		return out
	}
	plays := make([]*playbook.Play, len(sp.Plays))
	for i, p := range sp.Plays {
		plays[i] = &playbook.Play{Name: p.Name, Become: p.Become, Serial: playbook.Serial{Count: p.SerialCount, Percent: p.SerialPercent},
			MaxFailPercentage: p.MaxFailPercentage, Tasks: tasks(p.Tasks, false), Handlers: tasks(p.Handlers, true)}
	}
	return plays
}

// savedTask is the task of plays a saved step plans (Load checked the
// indexes).
func savedTask(plays []*playbook.Play, st *savedplan.Step) *playbook.Task {
	p := plays[st.PlayIndex]
	if st.Handler {
		return p.Handlers[st.TaskIndex]
	}
	return p.Tasks[st.TaskIndex]
}

// planSaved is planHost for a saved plan: the host's plan of play p is
// its saved steps (a task without one has nothing to do there). The
// host's first play takes the node lock in the round trip that reads every
// file and glob the plan was made from, and refuses the host when any of
// them changed since: nothing may change the node between their check and
// the writes.
func (r *runner) planSaved(ctx context.Context, s *hostRun, p *playbook.Play, become *bool) *planFailure {
	name := s.host.Name
	if f := r.saved.refuse[name]; f != nil {
		return f
	}
	hp := r.saved.hosts[name]
	if hp == nil {
		return &planFailure{name: "saved plan", refused: true, err: errors.New("not applied: the saved plan has no plan for this host; make a new plan")}
	}
	if _, err := r.connect(ctx, s, become); err != nil {
		return &planFailure{err: err}
	}
	if !s.verified {
		q := fingerprintQuery(hp.Fingerprints(), hp.Listings)
		pending := transport.Query{Globs: []string{path.Join(node.PendingDir(s.h.StateDir()), "*.json")}}
		if err := r.lockFirst(ctx, s, node.MergeQueries(q, pending)); err != nil {
			return &planFailure{err: err}
		}
		at(ctx, s, "verify fingerprints")
		msg, err := fingerprintDrift(ctx, s.h, hp.Fingerprints(), hp.Listings, "changed since the plan was made")
		if err != nil {
			return &planFailure{name: "verify fingerprints", err: fmt.Errorf("read planned files: %w", err)}
		}
		if msg != "" {
			return &planFailure{name: "verify fingerprints", refused: true, err: errors.New("refusing this host, nothing was changed: " + msg)}
		}
		s.verified = true
	}
	if s.prefetched == nil {
		s.prefetched = map[*playbook.Play]bool{}
	}
	s.prefetched[p] = true
	if err := r.readPending(ctx, s); err != nil {
		return &planFailure{err: err}
	}
	s.plans, s.replan = map[*playbook.Task]*module.Plan{}, false
	s.enter(phasePlanned)
	for _, t := range p.Tasks {
		if st, ok := r.saved.steps[name][t]; ok {
			s.plans[t] = st.plan
		} else {
			s.plans[t] = &module.Plan{}
		}
	}
	return nil
}

// savedHandler is the saved step of handler t on the host; a handler the
// plan did not foresee there is not run from it.
func (r *runner) savedHandler(s *hostRun, t *playbook.Task) (step, error) {
	st, ok := r.saved.steps[s.host.Name][t]
	if !ok {
		return step{}, fmt.Errorf("not applied: the saved plan has no step for handler %q on this host; make a new plan", t.Name)
	}
	return st, nil
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
// arguments decoded for the re-check (a loop's item by item); relative
// paths in them start where they started when the plan was made.
func savedStep(st *savedplan.Step, t *playbook.Task) (step, error) {
	m, ok := module.Lookup(st.Module)
	if !ok {
		return step{}, fmt.Errorf("module %q is not registered", st.Module)
	}
	plan := st.Plan
	if err := m.CheckData(&plan); err != nil {
		return step{}, fmt.Errorf("saved plan of %q: %w", st.Task, err)
	}
	if t.Loop != nil {
		// ItemValues is never nil on a loop's plan (register tells a
		// loop by it).
		plan.ItemValues = append([]any{}, st.ItemValues...)
		for i := range st.Items {
			sub := st.Items[i].Plan
			if err := m.CheckData(&sub); err != nil {
				return step{}, fmt.Errorf("saved plan of %q item %d: %w", st.Task, i+1, err)
			}
			plan.Items = append(plan.Items, &sub)
		}
		if len(plan.Items) == 0 {
			return step{}, fmt.Errorf("saved loop %q has no items", st.Task)
		}
	}
	out := step{task: t, plan: &plan}
	if st.Handler || m.Imperative || len(st.Args) == 0 {
		return out, nil
	}
	if t.Loop != nil {
		if len(st.ItemArgs) != len(plan.Items) {
			return step{}, fmt.Errorf("saved loop %q: %d items' arguments for %d items", st.Task, len(st.ItemArgs), len(plan.Items))
		}
		la := &playbook.LoopArgs{Items: plan.ItemValues, Module: st.Module}
		for i, raw := range st.ItemArgs {
			a, err := decodeArgs(m, raw, st.BaseDir)
			if err != nil {
				return step{}, fmt.Errorf("saved arguments of %q item %d: %w", st.Task, i+1, err)
			}
			la.Args = append(la.Args, a)
		}
		out.args = la
		return out, nil
	}
	a, err := decodeArgs(m, st.Args, st.BaseDir)
	if err != nil {
		return step{}, fmt.Errorf("saved arguments of %q: %w", st.Task, err)
	}
	out.args = a
	return out, nil
}

// decodeArgs decodes a module's saved arguments and validates them, with
// relative paths starting at baseDir.
func decodeArgs(m *module.Registration, raw json.RawMessage, baseDir string) (module.Args, error) {
	args := m.NewArgs()
	if err := json.Unmarshal(raw, args); err != nil {
		return nil, err
	}
	if baseDir != "" {
		m.GiveBaseDir(args, baseDir)
	}
	if err := args.Validate(); err != nil {
		return nil, err
	}
	return args, nil
}
