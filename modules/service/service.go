// Package service is Ansible's `service` and `systemd` (`systemd_service`)
// modules for systemd nodes: a unit started, stopped, restarted or
// reloaded, enabled or disabled at boot, masked or not, and systemd's view
// of unit files reloaded (daemon_reload). The decisions are Ansible's
// systemd module's, step for step, made from one read of the unit
// (`systemctl show`, and its unit files, so a unit file an earlier task of
// the play writes counts as there); the actions are `systemctl` run with
// argv, in Ansible's order (daemon-reload, mask, enable, state).
//
// As in Ansible, daemon_reload alone is not a change (it runs on every
// apply, never in check mode), and restarted/reloaded change on every run
// (they are not re-checked). Where Ansible's `service` would pick another
// init system, nodeconverge's drives systemd only: a node without
// systemctl fails saying so.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

func init() {
	module.Register(module.Registration{Name: "service", Module: Module{kind: "service"}, Prefetch: Module{}.Prefetch, ImperativePlan: Module{}.ImperativePlan, Data: newData})
	module.Register(module.Registration{Name: "systemd", Aliases: []string{"systemd_service"}, Module: Module{kind: "systemd"}, Prefetch: Module{}.Prefetch, ImperativePlan: Module{}.ImperativePlan, Data: newData})
}

// Args are ansible.builtin.systemd's arguments (service takes name, state,
// enabled and use; the others are refused for it, as Ansible's argument
// spec does).
type Args struct {
	Name          string `yaml:"name"`
	Service       string `yaml:"service"`
	Unit          string `yaml:"unit"`
	State         string `yaml:"state"`
	Enabled       *bool  `yaml:"enabled"`
	Masked        *bool  `yaml:"masked"`
	DaemonReload  bool   `yaml:"daemon_reload"`
	DaemonReload2 bool   `yaml:"daemon-reload"`
	DaemonReexec  bool   `yaml:"daemon_reexec"`
	DaemonReexec2 bool   `yaml:"daemon-reexec"`
	Force         bool   `yaml:"force"`
	NoBlock       bool   `yaml:"no_block"`
	Scope         string `yaml:"scope"`
	// Use is the service module's backend choice: auto and systemd are
	// the same here.
	Use string `yaml:"use"`

	kind string
}

// Validate checks the arguments as Ansible's argument spec does.
func (a *Args) Validate() error {
	n := 0
	for _, v := range []string{a.Name, a.Service, a.Unit} {
		if v != "" {
			n++
			a.Name = v
		}
	}
	a.Service, a.Unit = "", ""
	a.DaemonReload = a.DaemonReload || a.DaemonReload2
	a.DaemonReexec = a.DaemonReexec || a.DaemonReexec2
	a.DaemonReload2, a.DaemonReexec2 = false, false
	if a.kind == "service" {
		switch {
		case a.Masked != nil, a.DaemonReload, a.DaemonReexec, a.Force, a.NoBlock, a.Scope != "":
			return errors.New("masked, daemon_reload, daemon_reexec, force, no_block and scope are the systemd module's arguments: use systemd (ansible.builtin.systemd)")
		case a.Name == "":
			return errors.New("name is required")
		}
		switch a.Use {
		case "", "auto", "systemd":
		default:
			return fmt.Errorf("use: %q: nodeconverge drives systemd only (auto or systemd)", a.Use)
		}
	} else if a.Use != "" {
		return errors.New("use is the service module's argument")
	}
	switch a.Scope {
	case "", "system":
	default:
		return fmt.Errorf("scope: %q is not supported: nodeconverge manages system units", a.Scope)
	}
	switch a.State {
	case "", "started", "stopped", "restarted", "reloaded":
	default:
		return fmt.Errorf("state %q: one of started, stopped, restarted, reloaded", a.State)
	}
	if strings.ContainsAny(a.Name, "*?[") {
		return errors.New("This module does not currently support using glob patterns, found '" + strings.Trim(a.Name, " ") + "'")
	}
	if a.Name == "" && (a.State != "" || a.Enabled != nil || a.Masked != nil) {
		return errors.New("name is required with state, enabled or masked")
	}
	if a.Name == "" && !a.DaemonReload && !a.DaemonReexec {
		return errors.New("one of name, daemon_reload or daemon_reexec is required")
	}
	if strings.HasPrefix(a.Name, "-") {
		return fmt.Errorf("name %q: a unit name does not start with -", a.Name)
	}
	return nil
}

// Module implements module.Module for service and systemd.
type Module struct{ kind string }

// NewArgs returns empty arguments for the module's kind.
func (m Module) NewArgs() module.Args { return &Args{kind: m.kind} }

// props are the unit's properties the decisions read (and `status`).
var props = []string{"Id", "Names", "LoadState", "ActiveState", "SubState", "UnitFileState", "NeedDaemonReload", "MainPID", "FragmentPath", "LoadError"}

// unitDirs are where systemd looks for system units, first wins.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

func unitName(n string) string {
	if i := strings.LastIndexByte(n, '.'); i > 0 {
		switch n[i+1:] {
		case "service", "socket", "timer", "target", "mount", "automount", "path", "slice", "scope", "swap", "device":
			return n
		}
	}
	return n + ".service"
}

func (a *Args) query() transport.Query {
	q := transport.Query{}
	if a.Name == "" {
		return q
	}
	for _, d := range unitDirs {
		q.Files = append(q.Files, d+"/"+unitName(a.Name))
	}
	q.Cmds = []transport.Cmd{{Argv: []string{"systemctl", "show", "--property=" + strings.Join(props, ","), "--", a.Name}}}
	return q
}

// Prefetch reads the unit with the play's other reads.
func (Module) Prefetch(margs module.Args) transport.Query { return margs.(*Args).query() }

// newData is the registration's Data: a new, empty plan state.
func newData() any { return new(data) }

// data is what Apply runs, in order.
type data struct {
	Cmds [][]string `json:"cmds"`
	// Imperative: restarted or reloaded, which change on every run.
	Imperative bool `json:"imperative,omitempty"`
}

// ImperativePlan: a restart or reload is done again on every run, as in
// Ansible; its result is not re-checked.
func (Module) ImperativePlan(p *module.Plan) bool {
	var d data
	return len(p.Data) > 0 && json.Unmarshal(p.Data, &d) == nil && d.Imperative
}

func parseShow(out string) map[string]any {
	st := map[string]any{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && k != "" {
			st[k] = v
		}
	}
	return st
}

// Check reads the unit and plans Ansible's actions.
func (m Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	d := data{}
	plan := &module.Plan{Vars: map[string]any{}}
	sc := func(args ...string) []string { return append([]string{"systemctl"}, args...) }
	if a.DaemonReload {
		d.Cmds = append(d.Cmds, sc("daemon-reload"))
		plan.Always = append(plan.Always, "systemctl daemon-reload")
	}
	if a.DaemonReexec {
		d.Cmds = append(d.Cmds, sc("daemon-reexec"))
		plan.Always = append(plan.Always, "systemctl daemon-reexec")
	}
	if a.Name != "" {
		plan.Vars["name"] = a.Name
		snap, err := h.Query(ctx, a.query())
		if err != nil {
			return nil, fmt.Errorf("read unit %s: %w", a.Name, err)
		}
		res := snap.Cmds[0]
		switch {
		case res.ExitCode == 127:
			return nil, errors.New("systemctl is not on the node: nodeconverge's " + m.kind + " module drives systemd only")
		case !res.OK():
			return nil, fmt.Errorf("failure %d running systemctl show for '%s': %s", res.ExitCode, a.Name, strings.TrimSpace(string(res.Stderr)))
		}
		status := parseShow(string(res.Stdout))
		load, _ := status["LoadState"].(string)
		active, _ := status["ActiveState"].(string)
		ufs, _ := status["UnitFileState"].(string)
		found := load != "" && load != "not-found"
		if !found {
			for _, f := range snap.Files {
				if f.Exists {
					// A unit file an earlier task of the play writes:
					// systemd loads it when it is first named.
					found, load, active, ufs = true, "loaded", "inactive", "disabled"
					plan.Notes = append(plan.Notes, fmt.Sprintf("%s is planned by an earlier task; planned as a new unit, inactive and disabled", f.Path))
					break
				}
			}
		}
		if e, _ := status["LoadError"].(string); found && load != "masked" && e != "" && !strings.HasSuffix(e, `"Success"`) && e != `org.freedesktop.systemd1.NoSuchUnit "Unit `+a.Name+` not found."` {
			return nil, fmt.Errorf("Error loading unit file '%s': %s", a.Name, e)
		}
		if m.kind == "systemd" {
			plan.Vars["status"] = status
		}
		missing := func() error {
			return fmt.Errorf("Could not find the requested service %s: host", a.Name)
		}
		if a.Masked != nil {
			masked := ufs == "masked"
			if masked != *a.Masked {
				c := sc("mask", a.Name)
				if !*a.Masked {
					c = sc("unmask", a.Name)
				}
				if a.Force {
					c = append(c[:2:2], "--force", a.Name)
				}
				d.Cmds = append(d.Cmds, c)
				plan.Commands = append(plan.Commands, strings.Join(c, " "))
				ufs = map[bool]string{true: "masked", false: "disabled"}[*a.Masked]
			}
		}
		if a.Enabled != nil {
			if !found {
				return nil, missing()
			}
			// Ansible's reading of `systemctl is-enabled`: its exit 0
			// states, but the transient or indirect ones.
			enabled := false
			switch ufs {
			case "enabled", "static", "generated", "transient":
				enabled = true
			}
			plan.Vars["enabled"] = enabled
			if enabled != *a.Enabled {
				c := sc("enable", a.Name)
				if !*a.Enabled {
					c = sc("disable", a.Name)
				}
				if a.Force {
					c = append(c[:2:2], "--force", a.Name)
				}
				d.Cmds = append(d.Cmds, c)
				plan.Commands = append(plan.Commands, strings.Join(c, " "))
				plan.Vars["enabled"] = *a.Enabled
			}
		}
		if a.State != "" {
			if !found {
				return nil, missing()
			}
			plan.Vars["state"] = a.State
			running := active == "active" || active == "activating" || active == "reloading"
			var action string
			switch a.State {
			case "started":
				if !running {
					action = "start"
				}
			case "stopped":
				if running || active == "deactivating" {
					action = "stop"
				}
			default:
				action = strings.TrimSuffix(a.State, "ed")
				if !running {
					action = "start"
				}
				plan.Vars["state"] = "started"
				d.Imperative = true
			}
			if action != "" {
				c := sc(action, a.Name)
				if a.NoBlock {
					c = append(c[:2:2], "--no-block", a.Name)
				}
				d.Cmds = append(d.Cmds, c)
				plan.Commands = append(plan.Commands, strings.Join(c, " "))
			}
		}
	}
	if len(d.Cmds) > 0 {
		raw, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode plan: %w", err)
		}
		plan.Data = raw
	}
	return plan, nil
}

// Apply runs the planned systemctl commands in order; the first that
// fails fails the task with systemd's words.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	var d data
	if err := json.Unmarshal(p.Data, &d); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	var outs []string
	for _, c := range d.Cmds {
		// Starting or stopping a unit changes no file the run reads;
		// enable, disable and mask change links under /etc/systemd.
		var touches []string
		switch c[1] {
		case "start", "stop", "restart", "reload", "daemon-reload", "daemon-reexec":
			touches = []string{}
		}
		res, err := h.Exec(ctx, transport.Cmd{Argv: c, Touches: touches})
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", strings.Join(c, " "), err)
		}
		out := strings.TrimSpace(string(res.Stdout) + string(res.Stderr))
		if out != "" {
			outs = append(outs, out)
		}
		if !res.OK() {
			switch c[1] {
			case "daemon-reload", "daemon-reexec":
				return nil, fmt.Errorf("failure %d during %s: %s", res.ExitCode, c[1], out)
			}
			return nil, fmt.Errorf("Unable to %s service %s: %s", c[1], c[len(c)-1], out)
		}
	}
	return &module.Result{Changed: len(p.Commands) > 0, Output: strings.Join(outs, "\n")}, nil
}
