// Package command is the generic `command` module: it runs a command on the
// node. A command's effect cannot be known without running it, so in check
// mode it is reported as skipped (and says so) instead of pretending; the
// Ansible `creates`/`removes` guards make it idempotent.
//
// Like Ansible's `command`, it never runs a shell: `cmd` is split into argv
// (SplitArgs) and executed as such, so a value substituted into it from an
// inventory or a variable is data, never shell syntax. The `shell` module
// (modules/shell) is where a shell is asked for.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

// A command's plan is not a state: running it does not make the next Check
// come back empty, and that is fine (Imperative).
func init() {
	module.Register(module.Registration{Name: "command", Module: Module{}, Inputs: module.InputEnvironment, Imperative: true, Retries: true, Data: PlanData, Unsupported: unsupported})
}

// unsupported are ansible.builtin.command's arguments command does not
// take.
var unsupported = map[string]string{
	"stdin":                "not supported",
	"executable":           "not supported: command runs no shell; use shell",
	"warn":                 "not supported (removed in Ansible 2.14 too)",
	"strip_empty_ends":     "not supported",
	"expand_argument_vars": "not supported: command never expands variables",
}

// Args are the command module's arguments.
type Args struct {
	Cmd     string   `yaml:"cmd"`
	Argv    []string `yaml:"argv"`
	Creates string   `yaml:"creates"`
	Removes string   `yaml:"removes"`
	Chdir   string   `yaml:"chdir"`

	// Env is the task's environment: (SetEnvironment), run through env.
	Env map[string]string `yaml:"-" json:",omitempty"`
}

// SetEnvironment gives the command the task's environment: it runs as
// `env NAME=VALUE... argv`, each word quoted, so a value stays data.
func (a *Args) SetEnvironment(env map[string]string) { a.Env = env }

// EnvArgv is argv run with env set (`env NAME=VALUE... argv`), names in
// order; argv itself when env is empty.
func EnvArgv(env map[string]string, argv []string) []string {
	if len(env) == 0 {
		return argv
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	out := []string{"env"}
	for _, k := range names {
		out = append(out, k+"="+env[k])
	}
	return append(out, argv...)
}

// Validate checks what a type cannot.
func (a *Args) Validate() error {
	if (a.Cmd == "") == (len(a.Argv) == 0) {
		return errors.New("exactly one of cmd or argv is required")
	}
	if a.Cmd != "" {
		argv, err := SplitArgs(a.Cmd)
		if err != nil {
			return fmt.Errorf("cmd: %w", err)
		}
		if len(argv) == 0 {
			return errors.New("cmd: no command (only blanks)")
		}
	}
	return nil
}

// argv is the command to run: argv itself, or cmd split into words.
func (a *Args) argv() []string {
	if a.Cmd == "" {
		return a.Argv
	}
	argv, err := SplitArgs(a.Cmd)
	if err != nil {
		// Validate refused it already; an empty argv fails the run loudly.
		return nil
	}
	return argv
}

// Module implements module.Module for command.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

type cmdline struct{ transport.Cmd }

// String shows the command as a shell would need it typed: each word
// quoted where it has to be, so what the plan shows is what runs.
func (c cmdline) String() string {
	if c.Script != "" {
		return c.Script
	}
	return QuoteArgv(c.Argv)
}

// QuoteArgv joins argv for display, quoting only the words that need it.
func QuoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, s := range argv {
		if s != "" && strings.IndexFunc(s, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			q[i] = s
		} else {
			q[i] = transport.ShellQuote(s)
		}
	}
	return strings.Join(q, " ")
}

func (a *Args) cmd() cmdline {
	argv := EnvArgv(a.Env, a.argv())
	c := transport.Cmd{Argv: argv}
	if a.Chdir != "" {
		// Every word quoted: the shell that changes directory never sees
		// a value unquoted.
		q := make([]string, len(argv))
		for i, s := range argv {
			q[i] = transport.ShellQuote(s)
		}
		c = transport.Cmd{Script: "cd " + transport.ShellQuote(a.Chdir) + " && exec " + strings.Join(q, " ")}
	}
	return cmdline{c}
}

// Check decides from creates/removes whether the command would run.
func (Module) Check(ctx context.Context, h transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	c := a.cmd()
	return PlanCommand(ctx, h, a.Creates, a.Removes, c.Cmd, c.String())
}

// PlanCommand plans running c unless the Ansible guards say otherwise: a
// `creates` path that exists or a `removes` path that does not. The plan
// carries c itself, so Apply (and a saved plan) runs exactly what was shown
// (as shown). The shell module plans its scripts through it too.
func PlanCommand(ctx context.Context, h transport.Reader, creates, removes string, c transport.Cmd, shown string) (*module.Plan, error) {
	var paths []string
	for _, p := range []string{creates, removes} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) > 0 {
		snap, err := h.Query(ctx, transport.Query{Files: paths})
		if err != nil {
			return nil, fmt.Errorf("check creates/removes: %w", err)
		}
		if creates != "" && snap.File(creates).Exists {
			return &module.Plan{Notes: []string{creates + " exists"}}, nil
		}
		if removes != "" && !snap.File(removes).Exists {
			return &module.Plan{Notes: []string{removes + " does not exist"}}, nil
		}
	}
	data, err := json.Marshal(planData{Script: c.Script, Argv: c.Argv})
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	return &module.Plan{Commands: []string{shown}, Data: data}, nil
}

// PlanData returns a new, empty state of a command's (and a shell
// script's) plan: module.Registration.Data.
func PlanData() any { return new(planData) }

// planData is what Apply needs; it lives in the plan so a saved plan runs
// exactly the command that was reviewed.
type planData struct {
	Script string   `json:"script,omitempty"`
	Argv   []string `json:"argv,omitempty"`
}

// Apply runs the command; a non-zero exit fails the task with its output.
// The result comes back with the error too: its exit status and output
// are what `register:` keeps and `failed_when:` judges.
func (Module) Apply(ctx context.Context, h transport.Writer, p *module.Plan) (*module.Result, error) {
	var d planData
	if err := json.Unmarshal(p.Data, &d); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	res, err := h.Exec(ctx, transport.Cmd{Script: d.Script, Argv: d.Argv})
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", p.Commands[0], err)
	}
	stdout, stderr := strings.TrimRight(string(res.Stdout), "\n"), strings.TrimRight(string(res.Stderr), "\n")
	out := stdout
	if stderr != "" {
		out = strings.TrimLeft(out+"\n"+stderr, "\n")
	}
	rc := res.ExitCode
	result := &module.Result{Changed: true, Output: out, RC: &rc, Stdout: stdout, Stderr: stderr}
	if !res.OK() {
		return result, fmt.Errorf("%s exited %d:\n%s", p.Commands[0], res.ExitCode, out)
	}
	return result, nil
}
