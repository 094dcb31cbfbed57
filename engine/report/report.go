// Package report turns a run's plans and results into what people and tools
// read: a line per host per task, unified diffs, a recap, JSON, and the exit
// code. All of them are views of the same Run value, so they cannot disagree.
package report

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"nodeconverge/engine/module"
)

// Status is the outcome of one task on one host.
type Status string

// The statuses, as Ansible names them.
const (
	OK          Status = "ok"
	Changed     Status = "changed"
	Failed      Status = "failed"
	Unreachable Status = "unreachable"
	Skipped     Status = "skipped"
)

// Exit codes, documented in the README.
const (
	ExitOK          = 0 // success; in check mode nothing to change
	ExitFailed      = 1 // a task failed, or the run could not start
	ExitDrift       = 2 // check mode only: changes are pending
	ExitUnreachable = 4 // a host was unreachable and nothing failed
)

// TaskResult is one task on one host.
type TaskResult struct {
	Play     string         `json:"play"`
	Task     string         `json:"task"`
	Module   string         `json:"module"`
	Host     string         `json:"host"`
	Handler  bool           `json:"handler,omitempty"`
	Status   Status         `json:"status"`
	Msg      string         `json:"msg,omitempty"`
	Plan     *module.Plan   `json:"plan,omitempty"`
	Result   *module.Result `json:"result,omitempty"`
	Duration time.Duration  `json:"duration_ns"`
	// Because names the tasks whose changes notified this handler.
	Because []string `json:"because,omitempty"`
	// RolledBack lists the paths restored when a failure after a write
	// undid the host's run.
	RolledBack []string `json:"rolled_back,omitempty"`
	// Proofs are what the task proved of the running node (a restart's
	// proof by pod, `--prove`): one per runtime handler, proved, failed,
	// unproven or skipped, with the reason.
	Proofs []module.Proof `json:"proofs,omitempty"`
	// Ignored says the task failed on a host where its ignore_errors
	// kept the host in the play; the recap counts it as ignored, not
	// failed.
	Ignored bool `json:"ignored,omitempty"`
	// Rescued says the task failed inside a block whose rescue: took the
	// failure over; the recap counts it as rescued, not failed, as
	// Ansible's does.
	Rescued bool `json:"rescued,omitempty"`
	// NoLog says the task has `no_log: true`: every view shows only its
	// status (Shown), never its arguments, plan, diff, output or message.
	NoLog bool `json:"no_log,omitempty"`
	// Refused says the host's plan failed before anything of the play was
	// written there: the failure is a refusal, and the node is as the play
	// found it (an earlier play's writes are undone, see RolledBack).
	Refused bool `json:"refused,omitempty"`
	// Diff is what --diff prints for the task (unified file diffs and the
	// effective-config lines, redacted), carried by the reports of a run
	// made with --diff (View.Diff). It is filled only in the copy a report
	// shows, never by the runner: the run itself holds the contents.
	Diff string `json:"diff,omitempty"`
	// Args and Notify are what a saved plan needs to apply and re-check
	// the task later; they are not part of the report.
	Args   module.Args `json:"-"`
	Notify []string    `json:"-"`
	// BaseDir is where the task's relative paths start (its playbook's
	// directory), so a saved plan resolves them as planning did.
	BaseDir string `json:"-"`
}

// NoLogMsg is what a no_log task shows in place of its message and output,
// in Ansible's words.
const NoLogMsg = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"

// Shown is what any view may show of tr: tr itself, or, for a no_log
// task, a copy with its status, names, duration and rolled-back paths
// only. A rollback that failed is still said (the host needs a person),
// without its details.
func (tr *TaskResult) Shown() *TaskResult {
	if !tr.NoLog {
		return tr
	}
	c := *tr
	c.Plan, c.Result, c.Args, c.BaseDir, c.Proofs = nil, nil, nil, "", nil
	c.Msg = NoLogMsg
	switch {
	case strings.Contains(tr.Msg, "ROLLBACK FAILED"):
		c.Msg += "; ROLLBACK FAILED on this host (details hidden)"
	case len(tr.RolledBack) > 0:
		plural := "s"
		if len(tr.RolledBack) == 1 {
			plural = ""
		}
		c.Msg += fmt.Sprintf("; rolled back this host's run: restored %d file%s", len(tr.RolledBack), plural)
	}
	return &c
}

// Recap counts a host's task outcomes.
type Recap struct {
	OK          int `json:"ok"`
	Changed     int `json:"changed"`
	Failed      int `json:"failed"`
	Unreachable int `json:"unreachable"`
	Skipped     int `json:"skipped"`
	// Ignored counts failures whose task had ignore_errors.
	Ignored int `json:"ignored,omitempty"`
	// Rescued counts failures a block's rescue: took over.
	Rescued int `json:"rescued,omitempty"`
}

// Run is everything one invocation did or planned.
type Run struct {
	ID       string            `json:"run_id"`
	Check    bool              `json:"check"`
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
	Results  []*TaskResult     `json:"results"`
	Recap    map[string]*Recap `json:"recap"`
	// Hosts is the order hosts first appeared in, for stable output.
	Hosts []string `json:"hosts"`
	// Errors are failures of the run itself, not of a task (a play that
	// stopped on max_fail_percentage, say).
	Errors []string `json:"errors,omitempty"`
	// Lost names each host that became unreachable and what was lost
	// (its first unreachable result); an unreachable host is not a
	// failure of the run, but it is an error to read.
	Lost []string `json:"lost,omitempty"`
	// NotAttempted maps each host a stopped play never reached to why.
	NotAttempted map[string]string `json:"not_attempted,omitempty"`
	// Interrupted maps each host of a run interrupted by SIGINT or
	// SIGTERM to the state the run left it in.
	Interrupted map[string]string `json:"interrupted,omitempty"`
	// Notes are facts about the run worth reading that are not failures
	// (a stale node lock taken over from a run that died).
	Notes []string `json:"notes,omitempty"`
	// Groups maps each host of the run to the inventory groups it is in
	// ("all" left out), so a report can be read group by group.
	Groups map[string][]string `json:"groups,omitempty"`
	// Proofs are, per host, the proofs its results carried (the last of
	// each kind and name), kept when a streamed run forgets the results:
	// the Prometheus textfile is made from them. Not part of the JSON
	// report (each result carries its own).
	Proofs map[string][]module.Proof `json:"-"`
	// sealed are the hosts whose reports Seal handed out.
	sealed map[string]bool
	mu     sync.Mutex
}

// ReadDir is the fingerprint of a path that was a directory (a saved
// plan's reads).
const ReadDir = "directory"

// NewRun starts an empty run.
func NewRun(id string, check bool) *Run {
	return &Run{ID: id, Check: check, Started: time.Now().UTC(), Recap: map[string]*Recap{}}
}

// Add records a result; safe for concurrent use.
func (r *Run) Add(tr *TaskResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Results = append(r.Results, tr)
	if len(tr.Proofs) > 0 && !tr.NoLog {
		r.addProofs(tr.Host, tr.Proofs)
	}
	rc := r.recap(tr.Host)
	switch tr.Status {
	case OK:
		rc.OK++
	case Changed:
		rc.Changed++
	case Failed:
		switch {
		case tr.Ignored:
			rc.Ignored++
		case tr.Rescued:
			rc.Rescued++
		default:
			rc.Failed++
		}
	case Unreachable:
		if rc.Unreachable == 0 {
			what := tr.Task
			if what == "" {
				what = "connect"
			}
			r.Lost = append(r.Lost, fmt.Sprintf("host %s unreachable at %q: %s", tr.Host, what, firstLine(tr.Shown().Msg)))
		}
		rc.Unreachable++
	case Skipped:
		rc.Skipped++
	}
}

// addProofs keeps host's latest proof of each kind and name.
func (r *Run) addProofs(host string, ps []module.Proof) {
	if r.Proofs == nil {
		r.Proofs = map[string][]module.Proof{}
	}
	have := r.Proofs[host]
	for _, p := range ps {
		replaced := false
		for i := range have {
			if have[i].Kind == p.Kind && have[i].Name == p.Name {
				have[i], replaced = p, true
			}
		}
		if !replaced {
			have = append(have, p)
		}
	}
	r.Proofs[host] = have
}

// AddError records a failure of the run itself.
func (r *Run) AddError(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Errors = append(r.Errors, msg)
}

// AddNote records a fact about the run that is not a failure.
func (r *Run) AddNote(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Notes = append(r.Notes, msg)
}

func (r *Run) recap(host string) *Recap {
	rc, ok := r.Recap[host]
	if !ok {
		rc = &Recap{}
		r.Recap[host] = rc
		r.Hosts = append(r.Hosts, host)
	}
	return rc
}

// NotAttempt records that a stopped play never reached host, and why;
// the first reason is kept.
func (r *Run) NotAttempt(host, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recap(host)
	if r.NotAttempted == nil {
		r.NotAttempted = map[string]string{}
	}
	if _, ok := r.NotAttempted[host]; !ok {
		r.NotAttempted[host] = why
	}
}

// Interrupt records the state an interrupted run left host in.
func (r *Run) Interrupt(host, state string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recap(host)
	if r.Interrupted == nil {
		r.Interrupted = map[string]string{}
	}
	r.Interrupted[host] = state
}

// SetGroups records the inventory groups of the run's hosts.
func (r *Run) SetGroups(groups map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Groups = groups
}

// Unreachable says whether host had an unreachable result.
func (r *Run) Unreachable(host string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc, ok := r.Recap[host]
	return ok && rc.Unreachable > 0
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Touch makes host appear in the recap even if no task ran on it.
func (r *Run) Touch(host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recap(host)
}

// SortedHosts returns the hosts in first-seen order.
func (r *Run) SortedHosts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.Hosts...)
}

// ExitCode is the documented exit code of the run: failure beats
// unreachable beats drift.
func (r *Run) ExitCode() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var failed, unreachable, changed bool
	for _, rc := range r.Recap {
		failed = failed || rc.Failed > 0
		unreachable = unreachable || rc.Unreachable > 0
		changed = changed || rc.Changed > 0
	}
	switch {
	case failed || len(r.Errors) > 0:
		return ExitFailed
	case unreachable:
		return ExitUnreachable
	case r.Check && changed:
		return ExitDrift
	}
	return ExitOK
}
