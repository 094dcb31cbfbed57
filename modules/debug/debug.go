// Package debug is Ansible's `debug`: it says a message, or a variable's
// value, on each host, and registers it. `var` is a bare expression (parsed
// at load, evaluated with the host's variables); `verbosity` skips the task
// below that many -v, as Ansible does (nodeconverge's -v is 1). It reads and
// changes nothing.
package debug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/jinja"
	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

func init() {
	module.Register(module.Registration{Name: "debug", Module: Module{}, Inputs: module.InputVars, ExprArgs: []string{"var"}})
}

// StringList is a string or a list of strings, as Ansible's `type: list`
// arguments take either.
type StringList []string

// UnmarshalYAML reads one scalar or a sequence of scalars.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: each item must be a string", c.Line)
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return fmt.Errorf("line %d: must be a string or a list of strings", n.Line)
}

// Text is a message value as Ansible shows it: a string as it is, any other
// value as JSON.
func Text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Args are ansible.builtin.debug's arguments.
type Args struct {
	Msg       any    `yaml:"msg"`
	Var       string `yaml:"var"`
	Verbosity int    `yaml:"verbosity"`

	expr *jinja.Expr
	vars map[string]any
}

// SetVars receives the host's variables, which var is evaluated with.
func (a *Args) SetVars(v map[string]any) { a.vars = v }

// Validate checks the arguments and parses var.
func (a *Args) Validate() error {
	if a.Msg != nil && a.Var != "" {
		return errors.New("'msg' and 'var' are incompatible options")
	}
	if a.Verbosity < 0 {
		return errors.New("verbosity must be 0 or more")
	}
	if a.Var != "" {
		e, err := jinja.ParseExpr(a.Var)
		if err != nil {
			return fmt.Errorf("var: %q: %v", a.Var, err)
		}
		a.expr = e
	}
	return nil
}

// Module implements module.Module for debug.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

// Check says the message.
func (Module) Check(_ context.Context, _ transport.Reader, margs module.Args) (*module.Plan, error) {
	a := margs.(*Args)
	if v, _ := a.vars["ansible_verbosity"].(int); a.Verbosity > v {
		return &module.Plan{Skip: "Verbosity threshold not met.", Vars: map[string]any{"skipped_reason": "Verbosity threshold not met."}}, nil
	}
	if a.expr != nil {
		v, err := a.expr.Eval(a.vars)
		if err != nil {
			var je *jinja.Error
			if !errors.As(err, &je) || je.Undefined == "" {
				return nil, fmt.Errorf("var: %s: %v", a.Var, err)
			}
			v = "VARIABLE IS NOT DEFINED!"
		}
		return &module.Plan{Vars: map[string]any{a.Var: v}, Msg: a.Var + ": " + Text(v)}, nil
	}
	msg := a.Msg
	if msg == nil {
		msg = "Hello world!"
	}
	return &module.Plan{Vars: map[string]any{"msg": msg}, Msg: Text(msg)}, nil
}

// Apply is never called: the plan is always empty.
func (Module) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}
