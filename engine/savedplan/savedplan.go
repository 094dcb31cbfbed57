// Package savedplan is the file `nodeconverge apply --check --out FILE`
// writes and `nodeconverge apply FILE` applies: every change check mode
// planned, per host and in order, with the file contents to write and the
// fingerprints of the live files the plan was made from. Applying it later
// does exactly that plan, and refuses a host whose files changed since.
//
// Unlike the JSON report, a saved plan holds file contents (it must, to
// apply them), so it is written mode 0600.
package savedplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"nodeconverge/engine/module"
	"nodeconverge/engine/redact"
)

// Format identifies a saved plan file.
const Format = "nodeconverge-plan"

// Version is the saved plan format's version. Version 2 fingerprints
// every file the plan read, not only those it writes; a version 1 plan
// cannot prove the rest and is refused. Version 3 carries the plays (their
// order, hosts, serial, max_fail_percentage, tasks and handlers), so that
// a saved plan is applied by the same batch loop as a live run, and loops;
// a version 2 plan knows no batches and is refused.
const Version = 3

// Plan is a saved plan.
type Plan struct {
	Format    string    `json:"format"`
	Version   int       `json:"version"`
	RunID     string    `json:"run_id"`
	Created   time.Time `json:"created"`
	Playbooks []string  `json:"playbooks"`
	// Plays are the plays the plan was made from, in order: applying the
	// plan walks them as a live run walks the playbook.
	Plays []Play     `json:"plays"`
	Hosts []HostPlan `json:"hosts"`
}

// Play is what the batch loop needs of a play to apply its saved steps as
// a live run applies its tasks: its hosts in order (as the planning run
// selected them), its batches and failure limit, its connection's become,
// and its tasks and handlers (a host's steps name them by index).
type Play struct {
	Name              string   `json:"name"`
	Hosts             []string `json:"hosts"`
	SerialCount       int      `json:"serial,omitempty"`
	SerialPercent     float64  `json:"serial_percent,omitempty"`
	MaxFailPercentage *float64 `json:"max_fail_percentage,omitempty"`
	Become            *bool    `json:"become,omitempty"`
	Tasks             []Task   `json:"tasks"`
	Handlers          []Task   `json:"handlers,omitempty"`
}

// Task is one task or handler of a saved play.
type Task struct {
	Name   string   `json:"name"`
	Module string   `json:"module"`
	Notify []string `json:"notify,omitempty"`
	NoLog  bool     `json:"no_log,omitempty"`
	// Loop says the task runs its module once per item: its steps carry
	// their items' plans.
	Loop bool `json:"loop,omitempty"`
	// Timeout is the task's own `timeout:`; zero is the run's.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// HostPlan is one host's steps, in the order they run.
type HostPlan struct {
	Host string `json:"host"`
	// Failed is set when planning failed on the host; such a host is never
	// applied from this plan.
	Failed string `json:"failed,omitempty"`
	Steps  []Step `json:"steps"`
	// Reads fingerprints every file the host's plan was read from (path
	// -> SHA-256 of its content then, "" absent, report.ReadDir for a
	// directory): a drop-in the plan only read, or the main config when
	// it writes only a drop-in, is part of what its proof was made on.
	Reads map[string]string `json:"reads,omitempty"`
	// Listings are the globs the plan expanded (conf.d/*.toml) and their
	// matches then: a drop-in added or removed since changes the tree.
	Listings map[string][]string `json:"listings,omitempty"`
}

// Step is one task (or handler) with its plan.
type Step struct {
	// PlayIndex and TaskIndex name the step's task in Plan.Plays: the
	// play's Tasks, or its Handlers for a handler.
	PlayIndex int    `json:"play_index"`
	TaskIndex int    `json:"task_index"`
	Play      string `json:"play"`
	Task      string `json:"task"`
	Module    string `json:"module"`
	Handler   bool   `json:"handler,omitempty"`
	// NoLog is the task's `no_log: true`: applying the plan shows the
	// step's status only, and the file shows none of its plan's text.
	NoLog   bool            `json:"no_log,omitempty"`
	Notify  []string        `json:"notify,omitempty"`
	Because []string        `json:"because,omitempty"`
	Args    json.RawMessage `json:"args,omitempty"`
	// BaseDir is where relative paths in Args start (the playbook's
	// directory at planning), so the re-check reads what planning read.
	BaseDir string      `json:"base_dir,omitempty"`
	Plan    module.Plan `json:"plan"`
	// Contents holds Before and After of Plan.Files, index for index;
	// the plan's own JSON leaves contents out.
	Contents []Content `json:"contents"`
	// Items, ItemValues and ItemArgs are a loop's: each item's plan, the
	// items, and each item's arguments for the re-check.
	Items      []Item            `json:"items,omitempty"`
	ItemValues []any             `json:"item_values,omitempty"`
	ItemArgs   []json.RawMessage `json:"item_args,omitempty"`
}

// Item is one item of a loop step: its plan and the contents it writes.
type Item struct {
	Plan     module.Plan `json:"plan"`
	Contents []Content   `json:"contents"`
}

// Content is one file change's bytes.
type Content struct {
	Before []byte `json:"before,omitempty"`
	After  []byte `json:"after,omitempty"`
}

// New is an empty plan of a check run, to which the runner adds the plays
// and each host's plan as the run makes them.
func New(runID string, playbooks []string) *Plan {
	return &Plan{Format: Format, Version: Version, RunID: runID, Created: time.Now().UTC(), Playbooks: playbooks}
}

// SetPlan puts a host's planned change into the step: the plan as the file
// keeps it (displayed), the contents it writes, and for a loop every item's
// plan and arguments.
func (st *Step) SetPlan(p *module.Plan, items []json.RawMessage) {
	st.Plan, st.Contents = displayed(*p, st.NoLog), contentsOf(p)
	// A loop's items travel in the step's own fields (the plan's JSON
	// leaves them out).
	st.Plan.Items, st.Plan.ItemValues = nil, nil
	st.Items, st.ItemValues, st.ItemArgs = nil, nil, nil
	if p.ItemValues == nil {
		return
	}
	st.ItemValues = append([]any{}, p.ItemValues...)
	for _, sub := range p.Items {
		st.Items = append(st.Items, Item{Plan: displayed(*sub, st.NoLog), Contents: contentsOf(sub)})
	}
	st.ItemArgs = items
}

// contentsOf are a plan's file contents, index for index.
func contentsOf(p *module.Plan) []Content {
	var out []Content
	for _, f := range p.Files {
		out = append(out, Content{Before: f.Before, After: f.After})
	}
	return out
}

// displayed is p with the parts that are only ever shown (commands as
// shown, notes, validation evidence, effective-config changes) redacted,
// or for a no_log step left out: the file carries what applying needs
// (contents, Data, arguments) and nothing it would only print. Applying
// never runs what Commands says; it runs Data.
func displayed(p module.Plan, noLog bool) module.Plan {
	if noLog {
		cmds := make([]string, len(p.Commands))
		for i := range cmds {
			cmds[i] = "(command hidden: no_log)"
		}
		p.Commands, p.Notes, p.Drift, p.Evidence, p.Effective = cmds, nil, nil, nil, nil
		return p
	}
	texts := func(in []string) []string {
		var out []string
		for _, s := range in {
			out = append(out, redact.Text(s))
		}
		return out
	}
	p.Commands, p.Notes, p.Drift = texts(p.Commands), texts(p.Notes), texts(p.Drift)
	var ev []module.Evidence
	for _, e := range p.Evidence {
		e.Command, e.Output = redact.Values(e.Command), redact.Text(e.Output)
		ev = append(ev, e)
	}
	p.Evidence = ev
	var eff []module.EffectiveChange
	for _, e := range p.Effective {
		e.Before, e.After = redact.Values(e.Before), redact.Values(e.After)
		eff = append(eff, e)
	}
	p.Effective = eff
	return p
}

// Write saves the plan, readable only by its owner: it holds file contents.
func (p *Plan) Write(path string) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	// os.WriteFile would keep the mode of a regular file already at path,
	// which may be world-readable: tighten it before the contents go in.
	// Special files (--out /dev/stdout) are written as they are.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	werr := func() error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
			if err := f.Chmod(0o600); err != nil {
				return err
			}
		}
		_, err = f.Write(append(b, '\n'))
		return err
	}()
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	return nil
}

// IsPlanFile reports whether path holds a saved plan (so `apply FILE`
// knows a plan from a playbook).
func IsPlanFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	// The start of the file decides; reading a large playbook whole here
	// would cost before its size is checked.
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return false
	}
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && bytes.Contains(b[:min(len(b), 200)], []byte(`"`+Format+`"`))
}

// Load reads a saved plan and restores the file contents into the plans.
func Load(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: not a saved plan: %w", path, err)
	}
	if p.Format != Format || p.Version != Version {
		return nil, fmt.Errorf("%s: format %q version %d; this nodeconverge reads %q version %d: make a new plan (apply --check --out)", path, p.Format, p.Version, Format, Version)
	}
	for hi := range p.Hosts {
		for si := range p.Hosts[hi].Steps {
			st := &p.Hosts[hi].Steps[si]
			if err := restore(&st.Plan, st.Contents); err != nil {
				return nil, fmt.Errorf("%s: host %s step %q: %w", path, p.Hosts[hi].Host, st.Task, err)
			}
			for ii := range st.Items {
				if err := restore(&st.Items[ii].Plan, st.Items[ii].Contents); err != nil {
					return nil, fmt.Errorf("%s: host %s step %q item %d: %w", path, p.Hosts[hi].Host, st.Task, ii+1, err)
				}
			}
			if st.PlayIndex < 0 || st.PlayIndex >= len(p.Plays) {
				return nil, fmt.Errorf("%s: host %s step %q: play %d of %d", path, p.Hosts[hi].Host, st.Task, st.PlayIndex, len(p.Plays))
			}
			pl := p.Plays[st.PlayIndex]
			n := len(pl.Tasks)
			if st.Handler {
				n = len(pl.Handlers)
			}
			if st.TaskIndex < 0 || st.TaskIndex >= n {
				return nil, fmt.Errorf("%s: host %s step %q: task %d of play %q's %d", path, p.Hosts[hi].Host, st.Task, st.TaskIndex, pl.Name, n)
			}
		}
	}
	return &p, nil
}

// restore puts contents back into a plan's files.
func restore(p *module.Plan, cs []Content) error {
	if len(cs) != len(p.Files) {
		return fmt.Errorf("%d contents for %d files", len(cs), len(p.Files))
	}
	for i := range p.Files {
		p.Files[i].Before, p.Files[i].After = cs[i].Before, cs[i].After
	}
	return nil
}

// Fingerprints returns, for every path the host's steps touch and every
// path its plan read, the hash the live file had when the plan was made
// ("" for a file that did not exist). Only the first step touching a path
// speaks for the live node; later steps see what earlier ones planned.
func (hp *HostPlan) Fingerprints() map[string]string {
	out := map[string]string{}
	see := func(path, hash string) {
		if _, ok := out[path]; !ok {
			out[path] = hash
		}
	}
	for _, st := range hp.Steps {
		for _, f := range st.Plan.Files {
			switch f.Action {
			case module.Move:
				see(f.From, f.BeforeHash)
				see(f.Path, "")
			case module.Create:
				see(f.Path, "")
			default:
				see(f.Path, f.BeforeHash)
			}
		}
	}
	for p, h := range hp.Reads {
		see(p, h)
	}
	return out
}
