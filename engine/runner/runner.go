// Package runner runs plays: hosts x tasks in Ansible's linear order, bounded
// by forks, batched by serial, stopped by max_fail_percentage, with handlers
// flushed at the end of each batch on the hosts whose tasks changed
// something. It never knows what a module does: it hands Check a read-only
// view of the host, decides from the Plan, hands Apply the writer, and checks
// again to prove convergence.
package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-multierror"

	"nodeconverge/engine/facts"
	"nodeconverge/engine/fanout"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/overlay"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
)

// Options configure one run.
type Options struct {
	Check bool
	// Prove, with Check, proves the running node on every host through
	// each module.Prover of the play (prove.go): a pod sandbox started
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

type hostState struct {
	host *inventory.Host
	mu   sync.Mutex
	conn transport.Conn
	h    *node.Host
	// plan overlays the planned writes of earlier tasks in check mode;
	// reads, under it, fingerprints what the plan was made from.
	plan  *overlay.Overlay
	reads *readRecorder
	// prefetched marks the plays whose reads were fetched ahead.
	prefetched map[*playbook.Play]bool
	// lock is the node lock an apply run holds from its first read of the
	// host on; needLock says it is still to be taken (lockFirst).
	lock     *node.NodeLock
	needLock bool
	// pending are handlers owed on the node by earlier runs that died
	// between a write and its handler; owed are those this run recorded.
	pending map[string]node.PendingRecord
	owed    map[string][]string
	// served are the handlers this run ran on the host; clear are those
	// whose pending record the lock's release removes (not owed again
	// since they ran).
	served map[string]bool
	clear  map[string]bool
	// plans is the host's plan for the current play in apply mode: every
	// task, planned before the first write.
	plans map[*playbook.Task]*module.Plan
	// wrote says the run changed the host since its last rollback, so a
	// failure must roll it back; ran lists the commands it ran.
	wrote bool
	ran   []string
	// playWrote says the current play wrote to the host.
	playWrote bool
	// replan says an imperative step ran since the plan was made: the
	// rest of the play is planned again before its next write.
	replan bool
	// failed or unreachable hosts take no further part in the run, as in
	// Ansible.
	out bool
	// doing is the step the host's current task is at, for the message
	// of a task that runs past its timeout.
	doing atomic.Pointer[string]
	// abandoned says the host's connection was closed after a timeout:
	// nothing more is sent over it (its lock is left to go stale).
	abandoned bool
	// become is the play's become, for a reconnect.
	become *bool
	// lost says the host became unreachable; lost hosts' lock release
	// errors are expected, not failures.
	lost bool
	// drained is the result of the step that was in flight on the host
	// when the run was interrupted; restored says what restoring its
	// service after it was cut short found.
	drained  *report.TaskResult
	restored string
	// cut says the interruption kept a task of the current play from
	// starting on the host.
	cut bool
	// decided is what preflight (or, in a check, the host's group)
	// decided for the host: each task's arguments, or why it is skipped.
	decided
	// registered are the results earlier tasks registered on the host;
	// late the arguments of tasks rendered when the host reached them;
	// planErrs the planning failures of tasks with ignore_errors.
	registered map[string]any
	// facts are the host's gathered facts as variables (ansible_*,
	// ansible_facts), nil until a play that reads them gathered them.
	facts    map[string]any
	late     map[*playbook.Task]module.Args
	planErrs map[*playbook.Task]error
	// judged says runStep already judged the current task's result.
	judged bool
	// verified says a saved plan's fingerprints were proved on the host
	// (planSaved).
	verified bool
}

type runner struct {
	// playOf is each task's play, for reading ahead.
	playOf map[*playbook.Task]*playbook.Play
	o      Options
	inv    *inventory.Inventory
	run    *report.Run
	hosts  map[string]*hostState
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
	// in (its hostState is gone by then).
	left map[string]string
	// order is the order a check takes the hosts in (checkOrder).
	order []*inventory.Host
	// save collects the plan of a check run that saves it (Plan); saved
	// is the plan a saved-plan run applies (ApplySaved).
	save  *saver
	saved *savedRun
}

// playTally is a play's failures so far in a check run, over every group
// of hosts, and why it stopped, if it did.
type playTally struct {
	failed, size int
	stopped      string
}

// decided is what preflight decided for one host: each task's rendered
// arguments, and why a task is skipped there (when: false).
type decided struct {
	args map[*playbook.Task]module.Args
	skip map[*playbook.Task]string
}

// targetsOf selects each play's hosts, -l applied.
func targetsOf(inv *inventory.Inventory, plays []*playbook.Play, o Options) (map[*playbook.Play][]*inventory.Host, error) {
	var errs *multierror.Error
	targets := map[*playbook.Play][]*inventory.Host{}
	limit, err := inv.LimitSet(o.Limit)
	if err != nil {
		return nil, err
	}
	for _, p := range plays {
		hs, err := inv.Select(p.Hosts)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("%s: play %q: %w", p.Pos, p.Name, err))
			continue
		}
		var sel []*inventory.Host
		for _, h := range hs {
			if limit == nil || limit[h.Name] {
				sel = append(sel, h)
			}
		}
		targets[p] = sel
	}
	if err := errs.ErrorOrNil(); err != nil {
		return nil, flatErr(errs)
	}
	return targets, nil
}

// laterTasks are the tasks whose when: or arguments read a variable their
// play registers, or a fact: they are decided when a host reaches them.
func laterTasks(plays []*playbook.Play) map[*playbook.Task]bool {
	later := map[*playbook.Task]bool{}
	gathers := false
	for _, p := range plays {
		gathers = gathers || p.GatherFacts
	}
	for _, p := range plays {
		reg := registeredNames(p)
		for _, t := range p.AllTasks() {
			// A task that reads facts is decided once its host's facts
			// are read (in its first round trip); facts an earlier play
			// gathered stay the host's, as in Ansible.
			if readsRegistered(t, reg) || gathers && len(t.Facts) > 0 {
				later[t] = true
			}
		}
	}
	return later
}

// decideHosts renders every task for every host of in (nil: every target) it
// targets, so a typo in a variable fails the run before any node is
// touched, and evaluates its when: where it reads no registered variable:
// a task skipped on a host is not rendered there. It returns the
// decisions of the hosts keep says to keep (nil: all of them), and every
// error found.
func decideHosts(plays []*playbook.Play, targets map[*playbook.Play][]*inventory.Host, later map[*playbook.Task]bool, in, keep func(string) bool, o Options) (map[string]decided, error) {
	var errs *multierror.Error
	out := map[string]decided{}
	for _, p := range plays {
		for _, t := range p.AllTasks() {
			if later[t] {
				continue
			}
			for _, h := range targets[p] {
				if in != nil && !in(h.Name) {
					continue
				}
				vars, err := taskVars(h, p, t, nil, nil, o)
				if err != nil {
					errs = multierror.Append(errs, fmt.Errorf("host %s: %s: %w", h.Name, t.Pos, err))
					continue
				}
				ok, c, err := playbook.Holds(whenOf(t), vars)
				if err != nil {
					errs = multierror.Append(errs, fmt.Errorf("host %s: %w", h.Name, err))
					continue
				}
				var a module.Args
				if ok {
					a, err = t.Render(vars)
				}
				if err != nil && t.NoLog {
					// The renderer's message may quote the values.
					errs = multierror.Append(errs, fmt.Errorf("host %s: %s: task %q: its arguments do not render or validate (details hidden: no_log: true)", h.Name, t.Pos, t.Name))
					continue
				}
				if err != nil {
					errs = multierror.Append(errs, fmt.Errorf("host %s: %w", h.Name, err))
					continue
				}
				if keep != nil && !keep(h.Name) {
					continue
				}
				d, seen := out[h.Name]
				if !seen {
					d = decided{args: map[*playbook.Task]module.Args{}, skip: map[*playbook.Task]string{}}
					out[h.Name] = d
				}
				if ok {
					d.args[t] = a
				} else {
					d.skip[t] = falseCondition(c)
				}
			}
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return nil, flatErr(errs)
	}
	return out, nil
}

// flatErr prints a multierror as one error per line, without the "N errors
// occurred" banner, since each line already names its file and position.
func flatErr(m *multierror.Error) error {
	if len(m.Errors) == 1 {
		return m.Errors[0]
	}
	lines := make([]string, len(m.Errors))
	for i, e := range m.Errors {
		lines[i] = e.Error()
	}
	return errors.New(strings.Join(lines, "\n"))
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
	return &runner{o: o, inv: inv, run: report.NewRun(o.RunID, check), hosts: map[string]*hostState{}, stop: stop,
		playOf: map[*playbook.Task]*playbook.Play{}, last: map[string]*playbook.Play{}, later: map[*playbook.Task]bool{},
		tally: map[*playbook.Play]*playTally{}, left: map[string]string{}}
}

func (r *runner) state(h *inventory.Host) *hostState {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.hosts[h.Name]
	if !ok {
		s = &hostState{host: h, decided: r.undecided[h.Name]}
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

// checkInGroups runs a check in groups of -f hosts, each group through
// every play before the next group starts, each host retired (connection
// closed, report handed to the sink, state dropped) as its group ends: a
// fleet-wide drift run holds -f hosts, not the fleet. A check writes
// nothing, so running a group through every play before the next one
// starts changes no outcome, only the order of the output (each group
// prints its own PLAY header, as a serial batch does). max_fail_percentage
// still counts over the whole play (playTally).
// order is checkOrder's.
func (r *runner) checkInGroups(ctx context.Context, plays []*playbook.Play, order []*inventory.Host) {
	for start := 0; start == 0 || start < len(order); start += r.o.Forks {
		group := order[start:min(start+r.o.Forks, len(order))]
		in := make(map[string]bool, len(group))
		names := make([]string, len(group))
		for i, h := range group {
			in[h.Name] = true
			names[i] = h.Name
		}
		if start > 0 {
			// Preflight rendered these hosts' arguments too, and kept
			// only the first group's.
			d, err := decideHosts(plays, r.targets, r.later, func(n string) bool { return in[n] }, nil, r.o)
			if err != nil {
				r.run.AddError(fmt.Sprintf("decide the tasks of hosts %s: %v", strings.Join(names, ", "), err))
				return
			}
			r.mu.Lock()
			r.undecided = d
			r.mu.Unlock()
		}
		for _, p := range plays {
			if r.stopped() {
				return
			}
			var hs []*inventory.Host
			for _, h := range r.targets[p] {
				if in[h.Name] {
					hs = append(hs, h)
				}
			}
			// A play that targets no host still says so, once.
			if len(hs) > 0 || start == 0 && len(r.targets[p]) == 0 {
				r.play(ctx, p, hs)
			}
		}
		if r.stopped() {
			return
		}
		r.retire(names)
	}
}

// checkOrder is the order a check takes the hosts in: each host once, by
// its first play.
func checkOrder(plays []*playbook.Play, targets map[*playbook.Play][]*inventory.Host) []*inventory.Host {
	var order []*inventory.Host
	seen := map[string]bool{}
	for _, p := range plays {
		for _, h := range targets[p] {
			if !seen[h.Name] {
				seen[h.Name] = true
				order = append(order, h)
			}
		}
	}
	return order
}

// retire ends the run for hosts that are done: it releases each one's
// node lock, closes its connection, and drops its state (connection, read
// cache, plans, rendered arguments) once its report is sealed; a step
// abandoned after a timeout keeps the state it holds alive, and nothing
// else reads it. A host that was unreachable, or whose connection was abandoned after a
// timeout, keeps its lock: it goes stale when the connection's sshd
// process ends, and the next run takes it over (and says so). A host lost
// only now, at the release, is reported unreachable.
func (r *runner) retire(names []string) {
	var done []string
	for _, name := range names {
		r.mu.Lock()
		s := r.hosts[name]
		delete(r.hosts, name)
		r.mu.Unlock()
		if s == nil {
			continue
		}
		if r.save != nil && s.reads != nil {
			files, globs := s.reads.reads()
			r.save.reads(name, files, globs)
		}
		r.closeHost(s)
		r.left[name] = r.hostLeft(s)
		done = append(done, name)
	}
	r.seal(done)
}

// seal hands the hosts' reports to the sink.
func (r *runner) seal(names []string) {
	if r.o.Sink == nil && !r.o.Drop {
		return
	}
	for _, hr := range r.run.Seal(names, r.o.Drop) {
		if r.o.Sink != nil {
			r.o.Sink.Host(r.run, hr)
		}
	}
}

// closeHost releases the host's node lock and closes its connection.
func (r *runner) closeHost(s *hostState) {
	if s.abandoned {
		r.run.AddNote(fmt.Sprintf("%s: node lock not released: the host's connection was closed after a timeout; the next run takes the stale lock over", s.host.Name))
		return
	}
	if s.lock != nil {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackGrace)
		var served []string
		for hn := range s.clear {
			served = append(served, hn)
		}
		sort.Strings(served)
		err := s.lock.Release(ctx, served...)
		cancel()
		switch {
		case err == nil:
		case r.run.Unreachable(s.host.Name):
			r.run.AddNote(fmt.Sprintf("%s: node lock not released (the host is unreachable: %v); the next run takes the stale lock over", s.host.Name, err))
		case r.o.IsUnreachable(err) || ctx.Err() != nil:
			r.run.Add(&report.TaskResult{Task: "release the node lock", Host: s.host.Name, Status: report.Unreachable,
				Msg: fmt.Sprintf("lost the connection after the host's last task: %v; the next run takes the stale lock over", err)})
		default:
			r.run.AddError(fmt.Sprintf("release lock on %s: %v", s.host.Name, err))
		}
	}
	if s.conn != nil {
		if err := s.conn.Close(); err != nil {
			r.run.AddError(fmt.Sprintf("close connection to %s: %v", s.host.Name, err))
		}
	}
}

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
		var active []*hostState
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
			results := r.runTask(ctx, p, t, active, become, nil)
			var still []*hostState
			for i, tr := range results {
				switch tr.Status {
				case report.Failed, report.Unreachable:
					if tr.Ignored {
						still = append(still, active[i])
						continue
					}
					active[i].out = true
					if countsAsFailure(tr, active[i]) {
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
				still = append(still, active[i])
			}
			active = still
			if msg := failLimit(p, failedInBatch, size); msg != "" {
				r.run.AddError(fmt.Sprintf("play %q: %s", p.Name, msg))
				stopped = true
				if ti < len(p.Tasks)-1 {
					// A host stopped half way through the play is
					// the partial converge the plan exists to prevent.
					active = r.rollbackUnfinished(ctx, p, active, "the play stopped (max_fail_percentage) before this host ran every task")
				}
				break
			}
		}
		// Handlers run even after a max_fail stop on the hosts that are
		// still in: a restart owed for a written file must not be lost. A
		// failed handler (a restart that failed its health gates) counts
		// like a failed task: it is what stops a rolling restart. After an
		// interruption none starts: they stay owed on the node.
		if r.stopped() {
			var cut, whole []*hostState
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
		var still []*hostState
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
func (r *runner) flushQueued(ctx context.Context, p *playbook.Play, hs []*hostState) (failed int) {
	var q []*hostState
	for _, s := range hs {
		if hasQueued(s) {
			q = append(q, s)
		}
	}
	if len(q) == 0 {
		return 0
	}
	results := make([]*report.TaskResult, len(q))
	fanout.Each(r.o.Forks, q, func(i int, s *hostState) {
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

// hasQueued says whether a host still in the run has writes no round trip
// carried yet.
func hasQueued(s *hostState) bool { return s.h != nil && !s.out && s.h.Queued() > 0 }

// flushHost sends what is queued on one host (flushQueued); it returns the
// failed result to report, the host rolled back and out, or nil.
func (r *runner) flushHost(ctx context.Context, s *hostState, play string) *report.TaskResult {
	if !hasQueued(s) {
		return nil
	}
	start := time.Now()
	tr := &report.TaskResult{Play: play, Task: flushQueuedTask, Host: s.host.Name, Status: report.OK}
	tr = r.bounded(ctx, s, tr, r.o.Timeout, func(ctx context.Context) {
		at(ctx, s, flushQueuedTask)
		if err := s.h.Flush(ctx); err != nil {
			r.checkErr(tr, err)
			r.rollback(ctx, s, tr)
		}
	})
	tr.Duration = time.Since(start)
	if tr.Status == report.OK {
		return nil
	}
	s.out = true
	return tr
}

// planBatch plans every task of the play on each host of the batch, before
// anything is written; it returns the hosts whose plan succeeded and how
// many failed (as max_fail_percentage counts them), and reports each failure under one heading.
func (r *runner) planBatch(ctx context.Context, p *playbook.Play, active []*hostState, become *bool) ([]*hostState, int) {
	refusals := make([]*report.TaskResult, len(active))
	fanout.Each(r.o.Forks, active, func(i int, s *hostState) {
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
	var still []*hostState
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
func countsAsFailure(tr *report.TaskResult, s *hostState) bool {
	return tr.Status != report.Unreachable || s.playWrote
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

// planHost connects to the host and plans the whole play there. A failure
// to reach or read the host comes back without a task.
func (r *runner) planHost(ctx context.Context, s *hostState, p *playbook.Play, become *bool) *planFailure {
	if r.saved != nil {
		return r.planSaved(ctx, s, p, become)
	}
	if _, err := r.connect(ctx, s, become); err != nil {
		return &planFailure{err: err}
	}
	if err := r.prefetch(ctx, s, p.Tasks[0]); err != nil {
		return &planFailure{err: err}
	}
	s.plans, s.replan, s.playWrote = nil, false, false
	return r.planFrom(ctx, s, p, 0)
}

// rollbackUnfinished undoes the run on hosts that a stopped play left half
// way through its tasks, and fails them: they did not converge.
func (r *runner) rollbackUnfinished(ctx context.Context, p *playbook.Play, active []*hostState, why string) []*hostState {
	var undo []*hostState
	var kept []*hostState
	for _, s := range active {
		if s.playWrote {
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
	fanout.Each(r.o.Forks, undo, func(i int, s *hostState) {
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

func (r *runner) flushHandlers(ctx context.Context, p *playbook.Play, active []*hostState, notified map[string]map[string][]string, become *bool) (failed int) {
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
		var hs []*hostState
		for _, s := range active {
			if _, ok := who[s.host.Name]; ok && !s.out {
				hs = append(hs, s)
			}
		}
		if len(hs) == 0 {
			continue
		}
		results := r.runTask(ctx, p, h, hs, become, who)
		for i, tr := range results {
			if tr.Status == report.Failed || tr.Status == report.Unreachable {
				hs[i].out = true
				failed++
			}
		}
	}
	return failed
}

func (r *runner) runTask(ctx context.Context, p *playbook.Play, t *playbook.Task, hs []*hostState, become *bool, because map[string][]string) []*report.TaskResult {
	if r.o.Observer != nil {
		r.o.Observer.TaskStart(t.Name, t.Handler)
		if ts, ok := r.o.Observer.(report.TaskSizer); ok {
			ts.TaskHosts(len(hs))
		}
	}
	results := make([]*report.TaskResult, len(hs))
	fanout.Each(r.o.Forks, hs, func(i int, s *hostState) {
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
					r.o.Observer.Result(tr)
				}
				return
			}
		}
		why, a, derr := r.decide(s, p, t, s.registered)
		s.judged = false
		switch {
		case r.stopped():
			tr = r.notStarted(tr)
			s.cut = true
		case derr != nil:
			tr.Status, tr.Msg = report.Failed, derr.Error()
			if t.IgnoreErrors {
				tr.Ignored = true
			}
			r.register(s, t, tr)
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
		tr.Duration = time.Since(start)
		results[i] = tr
		r.run.Add(tr)
		if r.o.Observer != nil {
			r.o.Observer.Result(tr)
		}
	})
	return results
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (r *runner) connect(ctx context.Context, s *hostState, become *bool) (*node.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h != nil {
		return s.h, nil
	}
	at(ctx, s, "connect")
	s.become = become
	b := s.host.Conn.Become
	if become != nil {
		b = *become
	}
	c, err := r.o.Dial(ctx, s.host, b)
	if err != nil {
		return nil, err
	}
	s.conn = c
	hopts := r.o.HostOptions
	hopts.RunID = r.o.RunID
	h := node.NewHost(c, hopts)
	// One apply per node at a time: the lock is taken with the host's
	// first read (lockFirst). Check mode takes no lock: it never writes,
	// and every write of an apply is atomic per file.
	s.needLock = !r.o.Check
	s.h = h
	s.owed = map[string][]string{}
	s.reads = newReadRecorder(transport.ReadOnly(h))
	s.plan = overlay.New(s.reads)
	return s.h, nil
}

func (r *runner) execute(ctx context.Context, tr *report.TaskResult, s *hostState, t *playbook.Task, args module.Args, become *bool) {
	fail := func(st report.Status, err error) {
		tr.Status = st
		tr.Msg = err.Error()
	}
	h, err := r.connect(ctx, s, become)
	if err != nil {
		if r.o.IsUnreachable(err) {
			fail(report.Unreachable, err)
		} else {
			fail(report.Failed, err)
		}
		return
	}
	if err := r.prefetch(ctx, s, t); err != nil {
		if r.o.IsUnreachable(err) {
			fail(report.Unreachable, err)
		} else {
			fail(report.Failed, err)
		}
		return
	}
	m, ok := lookup(t)
	if !ok {
		fail(report.Failed, fmt.Errorf("module %q is not registered", tr.Module))
		return
	}
	if r.o.Check {
		at(ctx, s, "check")
		r.checkTask(ctx, tr, s, t, m, args)
		return
	}
	tr.BaseDir = baseDir(t)
	var plan *module.Plan
	if t.Handler && r.saved != nil {
		// A saved plan's handler runs as it was planned.
		st, err := r.savedHandler(s, t)
		if err != nil {
			tr.Status, tr.Msg = report.Failed, err.Error()
			r.rollback(ctx, s, tr)
			return
		}
		r.runStep(ctx, s, tr, st)
		return
	}
	if t.Handler {
		// Handlers are planned when they are owed, on the node as the
		// batch left it.
		at(ctx, s, "check the handler")
		if plan, err = m.Check(r.playCtx(ctx, s, t), transport.ReadOnly(h), args); err == nil {
			err = module.CheckPaths(plan)
		}
		if err != nil {
			r.checkErr(tr, err)
			r.rollback(ctx, s, tr)
			return
		}
	} else {
		p := r.playOf[t]
		// A saved plan is not planned again: each step proves its files
		// are what it was planned from before it writes (runStep).
		if s.replan && r.saved == nil {
			s.replan = false
			if f := r.planFrom(ctx, s, p, taskIndex(p, t)); f != nil {
				r.planFailed(tr, f, fmt.Sprintf("planned again after %s ran, on the node as it is now:", quoteList(s.ran)))
				r.rollback(ctx, s, tr)
				return
			}
		}
		if err, ok := s.planErrs[t]; ok {
			// Its ignore_errors let the plan go past it.
			r.checkErr(tr, err)
			return
		}
		if plan = s.plans[t]; plan == nil {
			// A task that reads a registered result the up-front plan
			// could not foresee is planned now, on the node as it is.
			if f := r.planFrom(ctx, s, p, taskIndex(p, t)); f != nil {
				r.planFailed(tr, f, "planned when the host reached it:")
				r.rollback(ctx, s, tr)
				return
			}
			if err, ok := s.planErrs[t]; ok {
				r.checkErr(tr, err)
				return
			}
		}
		if plan = s.plans[t]; plan == nil {
			tr.Status, tr.Msg = report.Failed, "internal error: the task was not planned on this host"
			r.rollback(ctx, s, tr)
			return
		}
	}
	r.runStep(ctx, s, tr, step{task: t, args: args, plan: plan})
}

// checkTask plans one task in check mode, on the files as the earlier
// tasks would leave them, and records what it would write.
func (r *runner) checkTask(ctx context.Context, tr *report.TaskResult, s *hostState, t *playbook.Task, m module.Module, args module.Args) {
	tr.BaseDir = baseDir(t)
	plan, err := m.Check(r.playCtx(ctx, s, t), s.plan, args)
	if err == nil {
		// The same rule as apply's plan, so check mode never plans a
		// write that apply refuses.
		err = module.CheckPaths(plan)
	}
	if err != nil {
		r.checkErr(tr, err)
		return
	}
	tr.Plan = plan
	tr.Msg = plan.Msg
	switch {
	case plan.Skip != "":
		tr.Status, tr.Msg = report.Skipped, plan.Skip
	case !plan.Changed():
		tr.Status = report.OK
	case isImperative(m):
		tr.Status = report.Skipped
		if len(plan.Restart) > 0 {
			tr.Msg = "check mode restarts nothing; it would restart " + strings.Join(plan.Restart, ", ")
		} else {
			tr.Msg = "check mode does not run commands; it would run: " + strings.Join(plan.Commands, "; ")
		}
	default:
		tr.Status = report.Changed
		s.plan.Record(plan.Files)
	}
}

// planFailed reports a task that would fail on the planned state as the
// host's failure: lead says when, the task is named with why.
func (r *runner) planFailed(tr *report.TaskResult, f *planFailure, lead string) {
	tr.Task, tr.Module, tr.Args, tr.Notify, tr.BaseDir = f.task.Name, f.task.Module, r.argsOf(f.task, r.hosts[tr.Host]), f.task.Notify, baseDir(f.task)
	tr.NoLog = f.task.NoLog
	tr.Plan = nil
	r.checkErr(tr, f.err)
	tr.Msg = fmt.Sprintf("%s task %q (%s) would fail: %s", lead, f.task.Name, f.task.Module, tr.Msg)
}

func quoteList(cmds []string) string {
	q := make([]string, len(cmds))
	for i, c := range cmds {
		q[i] = fmt.Sprintf("%q", c)
	}
	return strings.Join(q, ", ")
}

// prefetch reads, in one round trip per host and play, everything the
// play's tasks declare they will read (module.Prefetcher) and the pending
// handler records, so the tasks' own Queries are answered from the cache.
func (r *runner) prefetch(ctx context.Context, s *hostState, t *playbook.Task) error {
	p := r.playOf[t]
	if s.prefetched == nil {
		s.prefetched = map[*playbook.Play]bool{}
	}
	if p == nil || s.prefetched[p] {
		return r.lockFirst(ctx, s, transport.Query{})
	}
	s.prefetched[p] = true
	qs := []transport.Query{{Globs: []string{path.Join(node.PendingDir(s.h.StateDir()), "*.json")}}}
	for _, pt := range p.AllTasks() {
		m, ok := lookup(pt)
		if !ok {
			continue
		}
		if pf, ok := m.(module.Prefetcher); ok {
			if a := s.args[pt]; a != nil {
				qs = append(qs, pf.Prefetch(a))
			}
		}
	}
	gather := s.facts == nil && playReadsFacts(p)
	if gather {
		qs = append(qs, facts.Query())
	}
	q := node.MergeQueries(qs...)
	if s.needLock {
		if err := r.lockFirst(ctx, s, q); err != nil {
			return err
		}
	} else {
		at(ctx, s, "read ahead")
		if err := s.h.Prefetch(ctx, q); err != nil {
			return fmt.Errorf("read ahead: %w", err)
		}
	}
	if gather {
		if err := r.readFacts(ctx, s, p); err != nil {
			return err
		}
	}
	return r.readPending(ctx, s)
}

// readPending reads, once per host, the handlers earlier runs owe there
// (answered by the read ahead, which reads their directory).
func (r *runner) readPending(ctx context.Context, s *hostState) error {
	if s.pending == nil {
		pending, err := s.h.Pending(ctx)
		if err != nil {
			return fmt.Errorf("read pending handlers: %w", err)
		}
		s.pending = pending
		// The runs that owe these handlers keep their backups: a failed
		// owed restart rolls them back (owingWriter).
		var owing []string
		for _, rec := range pending {
			owing = append(owing, rec.RunID)
		}
		s.h.KeepRuns(owing)
	}
	return nil
}

// playReadsFacts says the play gathers facts and one of its tasks reads
// one: a play that reads none gathers none (nothing could tell).
func playReadsFacts(p *playbook.Play) bool {
	if !p.GatherFacts {
		return false
	}
	for _, t := range p.AllTasks() {
		if len(t.Facts) > 0 {
			return true
		}
	}
	return false
}

// readFacts takes the host's facts from the answer of its first round
// trip (the facts' command rode in it; the cache answers), and records
// Ansible's "Gathering Facts" result for the recap.
func (r *runner) readFacts(ctx context.Context, s *hostState, p *playbook.Play) error {
	start := time.Now()
	snap, err := s.h.Query(ctx, facts.Query())
	if err != nil {
		return fmt.Errorf("gather facts: %w", err)
	}
	if len(snap.Cmds) != 1 || !snap.Cmds[0].OK() {
		return fmt.Errorf("gather facts: the node's command failed")
	}
	f, err := facts.Parse(snap.Cmds[0].Stdout)
	if err != nil {
		return err
	}
	s.facts = facts.Vars(f)
	r.run.Add(&report.TaskResult{Play: p.Name, Task: "Gathering Facts", Module: "gather_facts", Host: s.host.Name, Status: report.OK, Duration: time.Since(start)})
	return nil
}

// ensureFacts reads the host's facts before a task that reads them is
// decided there, when nothing read the host yet in this play (a check
// mode run reads a host when its first task runs).
func (r *runner) ensureFacts(ctx context.Context, s *hostState, t *playbook.Task, become *bool) error {
	if _, err := r.connect(ctx, s, become); err != nil {
		return err
	}
	return r.prefetch(ctx, s, t)
}

// lockFirst takes the node lock of an apply, if the host does not hold it
// yet, in the round trip of the host's first read (q, which may be empty).
func (r *runner) lockFirst(ctx context.Context, s *hostState, q transport.Query) error {
	if !s.needLock {
		return nil
	}
	at(ctx, s, "take the node lock and read ahead")
	lock, err := s.h.LockAndPrefetch(ctx, true, node.NewLockOwner(r.o.RunID), q)
	if err != nil {
		return err
	}
	s.lock, s.needLock = lock, false
	if note := lock.Note(); note != "" {
		r.run.AddNote(s.host.Name + ": " + note)
	}
	return nil
}

// owedWriter returns the Writer a notifying task applies through: its
// first write carries, in the same round trip and ahead of the task's own
// ops, the records that the task's handlers are owed. A run killed between
// the write and the handler is then finished by the next run instead of
// leaving the node on the old config.
func (r *runner) owedWriter(s *hostState, t *playbook.Task, plan *module.Plan) (transport.Writer, error) {
	var bw transport.Writer = backupWriter{Writer: s.h.Later(fmt.Sprintf("task %q", t.Name)), stateDir: s.h.StateDir()}
	if t.Handler {
		if rec, ok := s.pending[t.Name]; ok && rec.RunID != "" && rec.RunID != r.o.RunID {
			return &owingWriter{Writer: bw, host: s.h, owing: rec.RunID}, nil
		}
		return bw, nil
	}
	if len(t.Notify) == 0 {
		return bw, nil
	}
	var ops []transport.Op
	for _, hn := range t.Notify {
		for _, f := range plan.Files {
			s.owed[hn] = append(s.owed[hn], f.Path)
		}
		// Owed again: the release must leave the new record.
		delete(s.clear, hn)
		op, err := node.PendingOp(s.h.StateDir(), node.PendingRecord{Handler: hn, RunID: r.o.RunID, Files: s.owed[hn], Since: time.Now().UTC()})
		if err != nil {
			return nil, fmt.Errorf("record pending handlers: %w", err)
		}
		ops = append(ops, op)
	}
	return &prependWriter{Writer: bw, ops: ops}, nil
}

// backupWriter keeps a backup of every live path a module changes, whether
// or not the module asked for one: a failure later in the run rolls the
// host back, and a path changed without a backup could not be restored.
type backupWriter struct {
	transport.Writer
	stateDir string
}

// Apply sets Backup on every op outside the state directory.
func (w backupWriter) Apply(ctx context.Context, ops []transport.Op) ([]transport.OpResult, error) {
	out := make([]transport.Op, len(ops))
	for i, op := range ops {
		if !strings.HasPrefix(op.Path, strings.TrimSuffix(w.stateDir, "/")+"/") {
			op.Backup = true
		}
		out[i] = op
	}
	return w.Writer.Apply(ctx, out)
}

// owingWriter is the Writer of a handler owed by an earlier run (killed
// between its write and the handler): a rollback the handler asks for (a
// restart whose gates fail) undoes this run and then the run that owes the
// restart, whose backups are still on the node. Without it, the owed
// restart of a killed run's bad change could only restart on that change.
type owingWriter struct {
	transport.Writer
	host  *node.Host
	owing string
	// restored are the paths the owing run's rollback restored.
	restored []string
	rolled   bool
}

// Rollback undoes this run, then the owing run (newest first), and returns
// every path either changed; both are attempted even when one fails.
func (w *owingWriter) Rollback(ctx context.Context) ([]string, error) {
	paths, err := w.Writer.Rollback(ctx)
	more, oerr := w.host.RollbackRun(ctx, w.owing)
	w.rolled, w.restored = true, more
	seen := map[string]bool{}
	for _, p := range paths {
		seen[p] = true
	}
	for _, p := range more {
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	if oerr != nil {
		oerr = fmt.Errorf("roll back run %s, which owed the restart: %w", w.owing, oerr)
	}
	return paths, errors.Join(err, oerr)
}

// prependWriter puts ops ahead of the first change a module makes.
type prependWriter struct {
	transport.Writer
	ops []transport.Op
}

// Apply performs the held ops and then the module's, in one round trip.
func (w *prependWriter) Apply(ctx context.Context, ops []transport.Op) ([]transport.OpResult, error) {
	n := len(w.ops)
	all := append(w.ops, ops...)
	w.ops = nil
	res, err := w.Writer.Apply(ctx, all)
	if len(res) >= n {
		res = res[n:]
	} else {
		res = nil
	}
	return res, err
}

// Exec first writes the held ops: a command may change the node too.
func (w *prependWriter) Exec(ctx context.Context, c transport.Cmd) (*transport.CmdResult, error) {
	if len(w.ops) > 0 {
		ops := w.ops
		w.ops = nil
		if _, err := w.Writer.Apply(ctx, ops); err != nil {
			return nil, fmt.Errorf("record pending handlers: %w", err)
		}
	}
	return w.Writer.Exec(ctx, c)
}

func (r *runner) checkErr(tr *report.TaskResult, err error) {
	tr.Msg = err.Error()
	tr.Status = report.Failed
	if r.o.IsUnreachable(err) {
		tr.Status = report.Unreachable
	}
	var ve *module.ValidationError
	if errors.As(err, &ve) && tr.Plan == nil {
		tr.Plan = &module.Plan{Evidence: ve.Evidence}
	}
}

func isImperative(m module.Module) bool {
	i, ok := m.(interface{ Imperative() bool })
	return ok && i.Imperative()
}
