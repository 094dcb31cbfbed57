package runner

import (
	"context"
	"fmt"
	"nodeconverge/engine/facts"
	"nodeconverge/engine/inventory"
	"nodeconverge/engine/module"
	"nodeconverge/engine/node"
	"nodeconverge/engine/overlay"
	"nodeconverge/engine/playbook"
	"nodeconverge/engine/report"
	"nodeconverge/engine/transport"
	"path"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// hostRun is one host's life in the run, as one object: its connection,
// its node lock, its plan of the current play, the write-behind queue and
// the read cache (its node.Host), its rollback and its release. Its phase
// says which step of that life it is at; the steps are
//
//	connect  (connect)       dial the host's one connection
//	lock     (lockFirst)     an apply's node lock, in the round trip of the first read
//	plan     (planHost)      every task of the play, before the play's first write
//	                         (a saved plan: its steps, after its fingerprints)
//	apply    (applyStep)     a step written (queued behind the next round trip)
//	flush    (flushHost)     what no round trip carried, sent at the play's end
//	handlers (flushHandlers) the batch's handlers on the host
//	release  (closeHost)     the lock released with the served handlers' records,
//	                         the connection closed
//
// and, per play, plan to handlers again. Live runs, checks and saved plans
// drive it through the one batch loop (play); only where the plan comes
// from differs.
type hostRun struct {
	host  *inventory.Host
	mu    sync.Mutex
	phase phase
	conn  transport.Conn
	h     *node.Host
	// plan overlays the planned writes of earlier tasks in check mode;
	// reads, under it, fingerprints what the plan was made from.
	plan  *overlay.Overlay
	reads *readRecorder
	// prefetched marks the plays whose reads were fetched ahead.
	prefetched map[*playbook.Play]bool
	// lock is the node lock an apply run holds from its first read of the
	// host on (phaseLocked).
	lock *node.NodeLock
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
	// blocks are the host's states in the blocks with rescue:/always:
	// it is in (blocks.go); failedBy the failure that leaves the last of
	// them. blame is the task the current task's failure belongs to when
	// it is another's (planned again, a later task would fail).
	blocks   map[*playbook.Block]*blockRun
	failedBy *report.TaskResult
	blame    *playbook.Task
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
func (r *runner) closeHost(s *hostRun) {
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
	s.enter(phaseReleased)
}

// hasQueued says whether a host still in the run has writes no round trip
// carried yet.
func hasQueued(s *hostRun) bool { return s.h != nil && !s.out && s.h.Queued() > 0 }

// flushHost sends what is queued on one host (flushQueued); it returns the
// failed result to report, the host rolled back and out, or nil.
func (r *runner) flushHost(ctx context.Context, s *hostRun, play string) *report.TaskResult {
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
		s.enter(phaseFlushed)
		return nil
	}
	s.out = true
	return tr
}

// planHost connects to the host and plans the whole play there. A failure
// to reach or read the host comes back without a task.
func (r *runner) planHost(ctx context.Context, s *hostRun, p *playbook.Play, become *bool) *planFailure {
	if r.saved != nil {
		return r.planSaved(ctx, s, p, become)
	}
	if _, err := r.connect(ctx, s, become); err != nil {
		return &planFailure{err: err}
	}
	if err := r.prefetch(ctx, s, p.Tasks[0]); err != nil {
		return &planFailure{err: err}
	}
	s.plans, s.replan = nil, false
	s.enter(phasePlanned)
	return r.planFrom(ctx, s, p, 0)
}

func (r *runner) connect(ctx context.Context, s *hostRun, become *bool) (*node.Host, error) {
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
	s.enter(phaseConnected)
	s.h = h
	s.owed = map[string][]string{}
	s.reads = newReadRecorder(transport.ReadOnly(h))
	s.plan = overlay.New(s.reads)
	return s.h, nil
}

// prefetch reads, in one round trip per host and play, everything the
// play's tasks declare they will read (Registration.Prefetch) and the pending
// handler records, so the tasks' own Queries are answered from the cache.
func (r *runner) prefetch(ctx context.Context, s *hostRun, t *playbook.Task) error {
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
		if m.Prefetch != nil {
			if a := s.args[pt]; a != nil {
				qs = append(qs, m.Prefetch(a))
			}
		}
	}
	gather := s.facts == nil && playReadsFacts(p)
	if gather {
		qs = append(qs, facts.Query())
	}
	q := node.MergeQueries(qs...)
	if r.needsLock(s) {
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
func (r *runner) readPending(ctx context.Context, s *hostRun) error {
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
func (r *runner) readFacts(ctx context.Context, s *hostRun, p *playbook.Play) error {
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
func (r *runner) ensureFacts(ctx context.Context, s *hostRun, t *playbook.Task, become *bool) error {
	if _, err := r.connect(ctx, s, become); err != nil {
		return err
	}
	return r.prefetch(ctx, s, t)
}

// lockFirst takes the node lock of an apply, if the host does not hold it
// yet, in the round trip of the host's first read (q, which may be empty).
func (r *runner) lockFirst(ctx context.Context, s *hostRun, q transport.Query) error {
	if !r.needsLock(s) {
		return nil
	}
	at(ctx, s, "take the node lock and read ahead")
	lock, err := s.h.LockAndPrefetch(ctx, true, node.NewLockOwner(r.o.RunID), q)
	if err != nil {
		return err
	}
	s.lock = lock
	s.enter(phaseLocked)
	if note := lock.Note(); note != "" {
		r.run.AddNote(s.host.Name + ": " + note)
	}
	return nil
}
