// Package shell is the `shell` module: like `command`, but its cmd is a
// script run by the node's /bin/sh, for pipes, redirections and the rest of
// shell syntax that `command` deliberately does not interpret.
//
// Unlike Ansible's shell module, a value substituted into cmd with {{ }} is
// inserted as one shell-quoted word (Registration.ShellArgs): a hostile
// inventory value such as "$(reboot)" is printed, never run. Shell syntax
// belongs in the playbook's own text, which is reviewed; values are data.
package shell

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/command"
)

// A script's plan is not a state (see command); substitutions into cmd are
// quoted (ShellArgs).
func init() {
	module.Register(module.Registration{Name: "shell", Module: Module{}, Inputs: module.InputEnvironment, Imperative: true, ShellArgs: []string{"cmd"}, Retries: true, Data: command.PlanData, Unsupported: unsupported})
}

// unsupported are ansible.builtin.shell's arguments shell does not take.
var unsupported = map[string]string{
	"stdin": "not supported",
	"warn":  "not supported (removed in Ansible 2.14 too)",
}

// Args are the shell module's arguments (Ansible's names).
type Args struct {
	Cmd     string `yaml:"cmd"`
	Creates string `yaml:"creates"`
	Removes string `yaml:"removes"`
	Chdir   string `yaml:"chdir"`
	// Executable is the shell that runs cmd (Ansible's executable:
	// /bin/bash), given the script as `EXECUTABLE -c SCRIPT`; /bin/sh
	// when empty.
	Executable string `yaml:"executable"`

	// Env is the task's environment: (SetEnvironment), exported first.
	Env map[string]string `yaml:"-" json:",omitempty"`
}

// SetEnvironment gives the script the task's environment: each variable
// exported, its value one quoted word, before the script.
func (a *Args) SetEnvironment(env map[string]string) { a.Env = env }

// Validate checks what a type cannot.
func (a *Args) Validate() error {
	if a.Cmd == "" {
		return errors.New("cmd is required")
	}
	if a.Executable != "" && !strings.HasPrefix(a.Executable, "/") {
		return fmt.Errorf("executable %q must be an absolute path (a shell such as /bin/bash)", a.Executable)
	}
	return nil
}

// Module implements module.Module for shell.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

// Check decides from creates/removes whether the script would run.
func (Module) Check(ctx context.Context, h transport.Reader, ma module.Args) (*module.Plan, error) {
	a := ma.(*Args)
	script := a.Cmd
	if len(a.Env) > 0 {
		names := make([]string, 0, len(a.Env))
		for k := range a.Env {
			names = append(names, k)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, k := range names {
			b.WriteString("export " + k + "=" + transport.ShellQuote(a.Env[k]) + "\n")
		}
		script = b.String() + script
	}
	if a.Chdir != "" {
		script = "cd " + transport.ShellQuote(a.Chdir) + " || exit 1\n" + script
	}
	c := transport.Cmd{Script: script}
	if a.Executable != "" {
		c = transport.Cmd{Argv: []string{a.Executable, "-c", script}}
	}
	return command.PlanCommand(ctx, h, a.Creates, a.Removes, c, script)
}

// Apply runs the planned script; a non-zero exit fails the task with its output.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	return command.Module{}.Apply(ctx, h, p)
}
