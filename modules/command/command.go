// Package command is the generic `command` module: it runs a command on the
// node. A command's effect cannot be known without running it, so in check
// mode it is reported as skipped (and says so) instead of pretending; the
// Ansible `creates`/`removes` guards make it idempotent.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

func init() { module.Register("command", Module{}) }

// Args are the command module's arguments.
type Args struct {
	Cmd     string   `yaml:"cmd"`
	Argv    []string `yaml:"argv"`
	Creates string   `yaml:"creates"`
	Removes string   `yaml:"removes"`
	Chdir   string   `yaml:"chdir"`
}

// Validate checks what a type cannot.
func (a *Args) Validate() error {
	if (a.Cmd == "") == (len(a.Argv) == 0) {
		return errors.New("exactly one of cmd or argv is required")
	}
	return nil
}

// Module implements module.Module for command.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

// Imperative tells the runner that a command's plan is not a state: running
// it does not make the next Check come back empty, and that is fine.
func (Module) Imperative() bool { return true }

type cmdline struct{ transport.Cmd }

func (c cmdline) String() string {
	if c.Script != "" {
		return c.Script
	}
	return strings.Join(c.Argv, " ")
}

func (a *Args) cmd() cmdline {
	c := transport.Cmd{Script: a.Cmd, Argv: a.Argv}
	if a.Chdir != "" {
		// Keep argv quoting intact: cd first, then exec the command.
		inner := c.Script
		if inner == "" {
			q := make([]string, len(a.Argv))
			for i, s := range a.Argv {
				q[i] = transport.ShellQuote(s)
			}
			inner = strings.Join(q, " ")
		}
		c = transport.Cmd{Script: "cd " + transport.ShellQuote(a.Chdir) + " && " + inner}
	}
	return cmdline{c}
}

// Check decides from creates/removes whether the command would run.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	var paths []string
	for _, p := range []string{a.Creates, a.Removes} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) > 0 {
		snap, err := h.Query(ctx, transport.Query{Files: paths})
		if err != nil {
			return nil, fmt.Errorf("check creates/removes: %w", err)
		}
		if a.Creates != "" && snap.File(a.Creates).Exists {
			return &module.Plan{Notes: []string{a.Creates + " exists"}}, nil
		}
		if a.Removes != "" && !snap.File(a.Removes).Exists {
			return &module.Plan{Notes: []string{a.Removes + " does not exist"}}, nil
		}
	}
	c := a.cmd()
	data, err := json.Marshal(planData{Script: c.Script, Argv: c.Argv})
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	return &module.Plan{Commands: []string{c.String()}, Data: data}, nil
}

// planData is what Apply needs; it lives in the plan so a saved plan runs
// exactly the command that was reviewed.
type planData struct {
	Script string   `json:"script,omitempty"`
	Argv   []string `json:"argv,omitempty"`
}

// Apply runs the command; a non-zero exit fails the task with its output.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	var d planData
	if err := json.Unmarshal(p.Data, &d); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	res, err := h.Exec(ctx, transport.Cmd{Script: d.Script, Argv: d.Argv})
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", p.Commands[0], err)
	}
	out := strings.TrimRight(string(res.Stdout), "\n")
	if se := strings.TrimRight(string(res.Stderr), "\n"); se != "" {
		out = strings.TrimLeft(out+"\n"+se, "\n")
	}
	if !res.OK() {
		return nil, fmt.Errorf("%s exited %d:\n%s", p.Commands[0], res.ExitCode, out)
	}
	return &module.Result{Changed: true, Output: out}, nil
}
