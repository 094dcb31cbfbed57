// Package runner runs plays: hosts x tasks in Ansible's linear order, bounded
// by forks, batched by serial, stopped by max_fail_percentage, with handlers
// flushed at the end of each batch on the hosts whose tasks changed
// something. It never knows what a module does: it hands Check a read-only
// view of the host, decides from the Plan, hands Apply the writer, and checks
// again to prove convergence.
package runner

import (
	"context"
	"sort"
	"sync"
	"time"

	"nodeconverge/engine/inventory"
	"nodeconverge/engine/node"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
)

// Options configure one run.
type Options struct {
	Check bool
	// Prove, with Check, proves the running node on every host through
	// each Registration.Prove of the play (prove.go): a pod sandbox started
	// and removed through every runtime; no file is written.
	Prove     bool
	Forks     int
	Limit     string
	ExtraVars map[string]any
	// Dial opens the one connection a host gets for the whole run.
	Dial func(ctx context.Context, h *inventory.Host, become bool) (transport.Conn, error)
	// IsUnreachable tells connection failures (the host is reported
	// unreachable, the others go on) from other errors.
	IsUnreachable func(error) bool
	RunID         string
	HostOptions   node.HostOptions
	Observer      report.Observer
	// Timeout bounds each task (and each host's planning of a play) on
	// each host, unless the task sets its own `timeout:`; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// InterruptGrace is how long steps in flight may go on once the run's
	// context ends (SIGINT/SIGTERM); zero means DefaultInterruptGrace.
	// Abort, when closed after that (a second signal), ends the grace at
	// once. See interrupt.go.
	InterruptGrace time.Duration
	Abort          <-chan struct{}
	// Sink, when set, gets each host's report once the host is done (its
	// last play over, its connection closed). With Drop the run then
	// forgets the host's results, keeping its recap line only: with a
	// streaming report the run's memory is bounded by the forks, not by
	// the fleet (a JSON report or a saved plan needs every result, so
	// their callers leave Drop unset).
	Sink report.HostSink
	Drop bool
	// Verbosity is the run's -v count, Ansible's ansible_verbosity (debug's
	// verbosity: is measured against it).
	Verbosity int

	// magic are Ansible's groups and hostvars, computed from the
	// inventory at the start of the run.
	magic map[string]any
}

// DefaultTimeout is how long one task may take on one host when neither
// the task nor the command line says. Long enough for a containerd restart
// with its health gates on a loaded node, short enough that a hung node
// cannot hold a nightly run for long.
const DefaultTimeout = 5 * time.Minute

// RollbackGrace bounds the rollback of a host whose task ran past its
// timeout or was cut short after an interruption (and the restore of its
// service): the task's own deadline is spent, and a hung connection must
// not hold the run again.
const RollbackGrace = 30 * time.Second

// rollbackGrace is RollbackGrace under the name the package used before
// it was exported (cmd/nodeconverge prints it).
const rollbackGrace = RollbackGrace

// setDefaults fills what a caller may leave unset.
func (o *Options) setDefaults() {
	if o.Forks <= 0 {
		o.Forks = 20
	}
	if o.RunID == "" {
		o.RunID = node.NewRunID(time.Now())
	}
	if o.IsUnreachable == nil {
		o.IsUnreachable = func(error) bool { return false }
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.InterruptGrace <= 0 {
		o.InterruptGrace = DefaultInterruptGrace
	}
}

type runner struct {
	// playOf is each task's play, for reading ahead.
	playOf map[*playbook.Task]*playbook.Play
	o      Options
	inv    *inventory.Inventory
	run    *report.Run
	hosts  map[string]*hostRun
	mu     sync.Mutex
	// stop ends when the run is interrupted: nothing new starts after it.
	stop context.Context
	// later are the tasks decided when a host reaches them (keywords.go).
	later map[*playbook.Task]bool
	// undecided is, per host without a state yet, what preflight decided
	// for it; the host's state takes it over (state). A check keeps only
	// the first group's: the next groups are decided as they start, so a
	// fleet's rendered arguments are not all held at once.
	undecided map[string]decided
	// targets are each play's hosts; last is, per host, the last play
	// that targets it: once it is over, the host is done (retire).
	targets map[*playbook.Play][]*inventory.Host
	last    map[string]*playbook.Play
	// tally carries a check run's max_fail_percentage count of a play
	// from one group of hosts to the next (checkInGroups).
	tally map[*playbook.Play]*playTally
	// left is, per retired host, the state an interruption would find it
	// in (its hostRun is gone by then).
	left map[string]string
	// order is the order a check takes the hosts in (checkOrder).
	order []*inventory.Host
	// save collects the plan of a check run that saves it (Plan); saved
	// is the plan a saved-plan run applies (ApplySaved).
	save  *saver
	saved *savedRun
	// blockHas are the sections of the plays' blocks (blocks.go).
	blockHas map[*playbook.Block]sections
}

// Run executes the plays and returns what happened. It returns an error only
// when the run could not start (bad input); task failures are in the Run.
func Run(ctx context.Context, inv *inventory.Inventory, plays []*playbook.Play, o Options) (*report.Run, error) {
	r, err := prepare(ctx, inv, plays, o)
	if err != nil {
		return nil, err
	}
	return r.walk(ctx, plays), nil
}

// prepare selects each play's hosts and renders every task for them
// (preflight): a runner ready to walk the plays, or the input's errors.
func prepare(ctx context.Context, inv *inventory.Inventory, plays []*playbook.Play, o Options) (*runner, error) {
	o.setDefaults()
	o.magic = magicVars(inv)
	targets, err := targetsOf(inv, plays, o)
	if err != nil {
		return nil, err
	}
	later := laterTasks(plays)
	var keep func(string) bool
	var order []*inventory.Host
	if o.Check {
		order = checkOrder(plays, targets)
		first := map[string]bool{}
		for _, h := range order[:min(o.Forks, len(order))] {
			first[h.Name] = true
		}
		keep = func(name string) bool { return first[name] }
	}
	undecided, err := decideHosts(plays, targets, later, nil, keep, o)
	if err != nil {
		return nil, err
	}
	r := newRunner(ctx, inv, o, o.Check)
	r.later, r.undecided, r.order = later, undecided, order
	r.setPlays(plays, targets)
	return r, nil
}

// setPlays records the plays the run walks and their hosts.
func (r *runner) setPlays(plays []*playbook.Play, targets map[*playbook.Play][]*inventory.Host) {
	r.targets = targets
	for _, p := range plays {
		for _, t := range p.AllTasks() {
			r.playOf[t] = p
		}
		for _, h := range targets[p] {
			r.last[h.Name] = p
		}
		r.tally[p] = &playTally{size: len(targets[p])}
		r.setBlocks(p)
	}
}

// walk is the one batch loop's driver, for live runs and saved plans
// alike: the plays in order (a check in groups of hosts, checkInGroups),
// then each host's interrupted state, the locks released and connections
// closed, and the run handed to the observer.
func (r *runner) walk(ctx context.Context, plays []*playbook.Play) *report.Run {
	work, release := r.workContext(ctx)
	defer release()
	if r.o.Check {
		r.checkInGroups(work, plays, r.order)
	} else {
		for _, p := range plays {
			if r.stopped() {
				break
			}
			r.play(work, p, r.targets[p])
		}
	}
	r.recordInterrupted()
	// Connections close before the recap is rendered, so what closing
	// them finds is in the recap and in the reports alike.
	r.closeAll()
	r.run.Finished = time.Now().UTC()
	if r.o.Observer != nil {
		r.o.Observer.Done(r.run)
	}
	return r.run
}

// newRunner is a runner with nothing run yet.
func newRunner(stop context.Context, inv *inventory.Inventory, o Options, check bool) *runner {
	return &runner{o: o, inv: inv, run: report.NewRun(o.RunID, check), hosts: map[string]*hostRun{}, stop: stop,
		playOf: map[*playbook.Task]*playbook.Play{}, last: map[string]*playbook.Play{}, later: map[*playbook.Task]bool{},
		tally: map[*playbook.Play]*playTally{}, left: map[string]string{}}
}

func (r *runner) state(h *inventory.Host) *hostRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.hosts[h.Name]
	if !ok {
		s = &hostRun{host: h, decided: r.undecided[h.Name]}
		delete(r.undecided, h.Name)
		r.hosts[h.Name] = s
	}
	return s
}

// closeAll retires every host still open, then seals the hosts that never
// got a connection (a play that stopped before reaching them), so a
// streaming report has a line for every host of the recap.
func (r *runner) closeAll() {
	r.mu.Lock()
	var open []string
	for name := range r.hosts {
		open = append(open, name)
	}
	r.mu.Unlock()
	sort.Strings(open)
	r.retire(open)
	r.seal(r.run.Unsealed())
}
