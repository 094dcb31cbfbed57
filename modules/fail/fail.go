// Package fail is Ansible's `fail`: the task fails on the host with msg
// (usually under a when:). It reads and changes nothing; in apply mode a
// host it fails is failed in the up-front plan, before anything was
// written there.
package fail

import (
	"context"
	"errors"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/modules/debug"
)

func init() {
	module.Register(module.Registration{Name: "fail", Module: Module{}})
}

// Args are ansible.builtin.fail's arguments.
type Args struct {
	Msg any `yaml:"msg"`
}

// Validate has nothing to check.
func (a *Args) Validate() error { return nil }

// Module implements module.Module for fail.
type Module struct{}

// NewArgs returns Ansible's default message.
func (Module) NewArgs() module.Args { return &Args{Msg: "Failed as requested from task"} }

// Check fails with the message.
func (Module) Check(_ context.Context, _ transport.Reader, margs module.Args) (*module.Plan, error) {
	return nil, errors.New(debug.Text(margs.(*Args).Msg))
}

// Apply is never called.
func (Module) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return nil, errors.New("fail: nothing to apply")
}
