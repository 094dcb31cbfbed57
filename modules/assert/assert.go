// Package assert is Ansible's `assert`: each expression of `that` must be
// true on the host, or the task fails with fail_msg. The expressions are
// bare Jinja2, as `when:` is, parsed at load (a syntax error names its
// file:line:col) and evaluated with the host's variables when the task is
// planned. It reads nothing from the node and changes nothing, so a failing
// assert in apply mode fails the host in the up-front plan, before any
// task has written there.
package assert

import (
	"context"
	"errors"
	"fmt"

	"nodeconverge/engine/jinja"
	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/debug"
)

func init() {
	module.Register(module.Registration{Name: "assert", Module: Module{}, Inputs: module.InputVars, ExprArgs: []string{"that"}})
}

// Args are ansible.builtin.assert's arguments.
type Args struct {
	That       debug.StringList `yaml:"that"`
	FailMsg    any              `yaml:"fail_msg"`
	Msg        any              `yaml:"msg"`
	SuccessMsg any              `yaml:"success_msg"`
	Quiet      bool             `yaml:"quiet"`

	exprs []*jinja.Expr
	vars  map[string]any
}

// SetVars receives the host's variables, which `that` is evaluated with.
func (a *Args) SetVars(v map[string]any) { a.vars = v }

// Validate parses the expressions.
func (a *Args) Validate() error {
	if len(a.That) == 0 {
		return errors.New("that is required: the conditions that must hold")
	}
	if a.FailMsg != nil && a.Msg != nil {
		return errors.New("give fail_msg once (msg is its alias)")
	}
	if a.FailMsg == nil {
		a.FailMsg, a.Msg = a.Msg, nil
	}
	a.exprs = a.exprs[:0]
	for _, s := range a.That {
		e, err := jinja.ParseExpr(s)
		if err != nil {
			return fmt.Errorf("that: %q: %v", s, err)
		}
		a.exprs = append(a.exprs, e)
	}
	return nil
}

// Module implements module.Module for assert.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

// Check evaluates the conditions in order; the first false one fails.
func (Module) Check(_ context.Context, _ transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	for i, e := range a.exprs {
		ok, err := e.Truth(a.vars)
		if err != nil {
			return nil, fmt.Errorf("The conditional check '%s' failed. The error was: %v", a.That[i], err)
		}
		if !ok {
			msg := "Assertion failed"
			if a.FailMsg != nil {
				msg = debug.Text(a.FailMsg)
			}
			return nil, errors.New(msg)
		}
	}
	msg := "All assertions passed"
	if a.SuccessMsg != nil {
		msg = debug.Text(a.SuccessMsg)
	}
	plan := &module.Plan{Vars: map[string]any{"msg": msg}}
	if !a.Quiet {
		plan.Msg = msg
	}
	return plan, nil
}

// Apply is never called: the plan is always empty.
func (Module) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}
