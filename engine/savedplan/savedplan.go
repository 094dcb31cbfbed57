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
	"nodeconverge/engine/report"
)

// Format identifies a saved plan file.
const Format = "nodeconverge-plan"

// Version is the saved plan format's version. Version 2 fingerprints
// every file the plan read, not only those it writes; a version 1 plan
// cannot prove the rest and is refused.
const Version = 2

// Plan is a saved plan.
type Plan struct {
	Format    string     `json:"format"`
	Version   int        `json:"version"`
	RunID     string     `json:"run_id"`
	Created   time.Time  `json:"created"`
	Playbooks []string   `json:"playbooks"`
	Hosts     []HostPlan `json:"hosts"`
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
	Play    string `json:"play"`
	Task    string `json:"task"`
	Module  string `json:"module"`
	Handler bool   `json:"handler,omitempty"`
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
}

// Content is one file change's bytes.
type Content struct {
	Before []byte `json:"before,omitempty"`
	After  []byte `json:"after,omitempty"`
}

// FromRun builds a saved plan from a check-mode run: every step whose plan
// changes something, including commands and handlers check mode did not
// run.
func FromRun(r *report.Run, playbooks []string) (*Plan, error) {
	if !r.Check {
		return nil, fmt.Errorf("a saved plan comes from a check-mode run")
	}
	if len(r.Interrupted) > 0 {
		// Hosts stopped part way have plans for only some of their
		// tasks: applying one would converge them part way.
		return nil, fmt.Errorf("the check run was interrupted: its plan is incomplete and was not saved")
	}
	sp := &Plan{Format: Format, Version: Version, RunID: r.ID, Created: time.Now().UTC(), Playbooks: playbooks}
	byHost := map[string]*HostPlan{}
	for _, h := range r.SortedHosts() {
		sp.Hosts = append(sp.Hosts, HostPlan{Host: h})
	}
	for i := range sp.Hosts {
		hp := &sp.Hosts[i]
		byHost[hp.Host] = hp
		if rd := r.Reads[hp.Host]; rd != nil {
			hp.Reads, hp.Listings = rd.Files, rd.Globs
		}
	}
	for _, tr := range r.Results {
		hp := byHost[tr.Host]
		if hp == nil {
			continue
		}
		switch tr.Status {
		case report.Failed, report.Unreachable:
			hp.Failed = fmt.Sprintf("task %q: %s", tr.Task, redact.Text(tr.Shown().Msg))
			continue
		}
		if tr.Plan == nil || !tr.Plan.Changed() {
			continue
		}
		args, err := json.Marshal(tr.Args)
		if err != nil {
			return nil, fmt.Errorf("save args of %q on %s: %w", tr.Task, tr.Host, err)
		}
		st := Step{Play: tr.Play, Task: tr.Task, Module: tr.Module, Handler: tr.Handler, NoLog: tr.NoLog, Notify: tr.Notify,
			Because: tr.Because, Args: args, BaseDir: tr.BaseDir, Plan: displayed(*tr.Plan, tr.NoLog)}
		for _, f := range tr.Plan.Files {
			st.Contents = append(st.Contents, Content{Before: f.Before, After: f.After})
		}
		hp.Steps = append(hp.Steps, st)
	}
	return sp, nil
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
		return nil, fmt.Errorf("%s: format %q version %d; this nodeconverge reads %q version %d", path, p.Format, p.Version, Format, Version)
	}
	for hi := range p.Hosts {
		for si := range p.Hosts[hi].Steps {
			st := &p.Hosts[hi].Steps[si]
			if len(st.Contents) != len(st.Plan.Files) {
				return nil, fmt.Errorf("%s: host %s step %q: %d contents for %d files", path, p.Hosts[hi].Host, st.Task, len(st.Contents), len(st.Plan.Files))
			}
			for i := range st.Plan.Files {
				st.Plan.Files[i].Before = st.Contents[i].Before
				st.Plan.Files[i].After = st.Contents[i].After
			}
		}
	}
	return &p, nil
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
