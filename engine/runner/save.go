package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/redact"
	"nodeconverge/engine/report"
	"nodeconverge/engine/savedplan"
)

// Plan is a check run that also saves its plan (`apply --check --out`):
// the plays as the batch loop walks them, and each host's plan as the host
// made it (every step that changes something, loops item by item, the
// handlers it would run, and the fingerprints of everything it read).
// ApplySaved walks the same plays with it. The plan is nil, with an error,
// when the run was interrupted: its hosts were planned part way.
func Plan(ctx context.Context, inv *inventory.Inventory, plays []*playbook.Play, playbooks []string, o Options) (*report.Run, *savedplan.Plan, error) {
	for _, p := range plays {
		for _, t := range p.Tasks {
			if t.Block != nil {
				return nil, nil, fmt.Errorf("%s: a block with rescue: or always: cannot be saved in a plan: which of its tasks run is known only when they run; apply the playbook itself", t.Block.Pos)
			}
			if t.Meta == "flush_handlers" {
				return nil, nil, fmt.Errorf("%s: meta: flush_handlers cannot be saved in a plan: the tasks after it are planned once its handlers ran; apply the playbook itself", t.Pos)
			}
		}
	}
	o.Check = true
	// Every host's plan is kept until the end: nothing is dropped.
	o.Drop = false
	r, err := prepare(ctx, inv, plays, o)
	if err != nil {
		return nil, nil, err
	}
	r.save = newSaver(r.o.RunID, playbooks, plays, r.targets)
	run := r.walk(ctx, plays)
	sp, err := r.save.plan(run)
	return run, sp, err
}

// saver collects a check run's saved plan as the hosts plan their tasks.
type saver struct {
	mu sync.Mutex
	sp *savedplan.Plan
	// play and task are each play's index in sp.Plays, and each task's in
	// its play's Tasks (or Handlers).
	play  map[*playbook.Play]int
	task  map[*playbook.Task]int
	hosts map[string]*savedplan.HostPlan
	err   error
}

func newSaver(runID string, playbooks []string, plays []*playbook.Play, targets map[*playbook.Play][]*inventory.Host) *saver {
	sv := &saver{sp: savedplan.New(runID, playbooks), play: map[*playbook.Play]int{}, task: map[*playbook.Task]int{}, hosts: map[string]*savedplan.HostPlan{}}
	tasks := func(ts []*playbook.Task) []savedplan.Task {
		out := make([]savedplan.Task, len(ts))
		for i, t := range ts {
			sv.task[t] = i
			out[i] = savedplan.Task{Name: t.Name, Module: t.Module, Notify: t.Notify, NoLog: t.NoLog, Loop: t.Loop != nil, Timeout: t.Timeout}
		}
		return out
	}
	for i, p := range plays {
		sv.play[p] = i
		sp := savedplan.Play{Name: p.Name, SerialCount: p.Serial.Count, SerialPercent: p.Serial.Percent,
			MaxFailPercentage: p.MaxFailPercentage, Become: p.Become, Tasks: tasks(p.Tasks), Handlers: tasks(p.Handlers)}
		for _, h := range targets[p] {
			sp.Hosts = append(sp.Hosts, h.Name)
		}
		sv.sp.Plays = append(sv.sp.Plays, sp)
	}
	return sv
}

// host is name's plan; sv.mu is held.
func (sv *saver) host(name string) *savedplan.HostPlan {
	hp := sv.hosts[name]
	if hp == nil {
		hp = &savedplan.HostPlan{Host: name}
		sv.hosts[name] = hp
	}
	return hp
}

// result keeps what a host planned for task t of play p: a step when its
// plan changes something; a failure marks the host as not to be applied.
func (sv *saver) result(p *playbook.Play, t *playbook.Task, tr *report.TaskResult) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	hp := sv.host(tr.Host)
	switch tr.Status {
	case report.Failed, report.Unreachable:
		if hp.Failed == "" {
			hp.Failed = fmt.Sprintf("task %q: %s", tr.Task, redact.Text(tr.Shown().Msg))
		}
		return
	}
	if tr.Plan == nil || !tr.Plan.Changed() {
		return
	}
	st := savedplan.Step{PlayIndex: sv.play[p], TaskIndex: sv.task[t], Play: p.Name, Task: t.Name, Module: t.Module, Handler: t.Handler,
		NoLog: t.NoLog, Notify: t.Notify, Because: tr.Because, BaseDir: tr.BaseDir}
	var items []json.RawMessage
	if la, ok := tr.Args.(*playbook.LoopArgs); ok {
		for i, a := range la.Args {
			b, err := json.Marshal(a)
			if err != nil {
				sv.err = errors.Join(sv.err, fmt.Errorf("save args of %q item %d on %s: %w", t.Name, i+1, tr.Host, err))
				return
			}
			items = append(items, b)
		}
	}
	args, err := json.Marshal(tr.Args)
	if err != nil {
		sv.err = errors.Join(sv.err, fmt.Errorf("save args of %q on %s: %w", t.Name, tr.Host, err))
		return
	}
	st.Args = args
	st.SetPlan(tr.Plan, items)
	hp.Steps = append(hp.Steps, st)
}

// reads keeps the fingerprints of what a host's plan was made from.
func (sv *saver) reads(host string, files map[string]string, globs map[string][]string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	hp := sv.host(host)
	hp.Reads, hp.Listings = files, globs
}

// plan is the saved plan once the run is over: every host the run
// touched, in name order; a host a stopped play never reached has no plan
// and is marked so.
func (sv *saver) plan(run *report.Run) (*savedplan.Plan, error) {
	if len(run.Interrupted) > 0 {
		// Hosts stopped part way have plans for only some of their
		// tasks: applying one would converge them part way.
		return nil, errors.New("the check run was interrupted: its plan is incomplete and was not saved")
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.err != nil {
		return nil, sv.err
	}
	for _, name := range run.SortedHosts() {
		hp := *sv.host(name)
		if why, ok := run.NotAttempted[name]; ok && hp.Failed == "" {
			hp.Failed = "not planned: " + why
		}
		sv.sp.Hosts = append(sv.sp.Hosts, hp)
	}
	return sv.sp, nil
}
