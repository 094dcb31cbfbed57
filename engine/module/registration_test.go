package module_test

import (
	"context"
	"strings"
	"testing"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

type plainArgs struct{}

func (*plainArgs) Validate() error { return nil }

// varsArgs take the host's variables.
type varsArgs struct {
	plainArgs
	vars map[string]any
}

func (a *varsArgs) SetVars(v map[string]any) { a.vars = v }

type stub struct{ newArgs func() module.Args }

func (s stub) NewArgs() module.Args { return s.newArgs() }
func (stub) Check(context.Context, transport.Reader, module.Args) (*module.Plan, error) {
	return &module.Plan{}, nil
}
func (stub) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}

// prefetching has a Prefetch method, which only its registration can make
// the runner call.
type prefetching struct{ stub }

func (prefetching) Prefetch(module.Args) transport.Query { return transport.Query{} }

func plain() module.Args    { return &plainArgs{} }
func withVars() module.Args { return &varsArgs{} }

// registerErr is what Register panics with for r, "" when it registers.
func registerErr(r module.Registration) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = p.(string)
		}
	}()
	module.Register(r)
	return ""
}

// TestRegisterRefusesWhatItDoesNotState: a registration says everything the
// engine will do with the module; a method it would call that the
// registration leaves out, or a capability stated but not implemented,
// stops the binary at init instead of being silently lost.
func TestRegisterRefusesWhatItDoesNotState(t *testing.T) {
	for _, c := range []struct {
		name string
		reg  module.Registration
		want string
	}{
		{"setter not stated", module.Registration{Name: "reg_t1", Module: stub{withVars}}, "implements SetVars (InputVars)"},
		{"input not implemented", module.Registration{Name: "reg_t2", Module: stub{plain}, Inputs: module.InputBaseDir}, "states SetBaseDir (InputBaseDir)"},
		{"method not stated", module.Registration{Name: "reg_t3", Module: prefetching{stub{plain}}}, "has a method Prefetch"},
		{"facts not implemented", module.Registration{Name: "reg_t4", Module: stub{plain}, SetsFacts: true}, "states Facts (SetsFacts)"},
		{"reserved without facts", module.Registration{Name: "reg_t5", Module: stub{plain}, FactReserved: []string{"x"}}, "names FactReserved"},
		{"no module", module.Registration{Name: "reg_t6"}, "needs a name and a module"},
	} {
		got := registerErr(c.reg)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: Register panicked with %q, want it to say %q", c.name, got, c.want)
		}
		if _, ok := module.Lookup(c.reg.Name); ok {
			t.Errorf("%s: refused registration %q is registered", c.name, c.reg.Name)
		}
	}
}

// TestRegistrationNamesAndInputs: a module is found under its name and its
// aliases as one registration, a name is taken once, and the inputs it
// states reach its Args.
func TestRegistrationNamesAndInputs(t *testing.T) {
	pf := prefetching{stub{withVars}}
	if got := registerErr(module.Registration{Name: "reg_ok", Aliases: []string{"ns.reg_ok"}, Module: pf, Inputs: module.InputVars, Prefetch: pf.Prefetch}); got != "" {
		t.Fatalf("Register: %s", got)
	}
	r, ok := module.Lookup("reg_ok")
	alias, aok := module.Lookup("ns.reg_ok")
	if !ok || !aok || r != alias {
		t.Fatalf("Lookup(reg_ok) = %p %v, Lookup(ns.reg_ok) = %p %v: want one registration", r, ok, alias, aok)
	}
	if got := registerErr(module.Registration{Name: "other", Aliases: []string{"reg_ok"}, Module: stub{plain}}); !strings.Contains(got, `"reg_ok" registered twice`) {
		t.Errorf("a second module under a taken name: %q", got)
	}
	n := 0
	for _, x := range module.All() {
		if x == r {
			n++
		}
	}
	if n != 1 {
		t.Errorf("All lists reg_ok %d times, want once", n)
	}
	a := r.NewArgs().(*varsArgs)
	r.GiveVars(a, map[string]any{"x": 1})
	if a.vars["x"] != 1 {
		t.Errorf("GiveVars did not reach the Args: %v", a.vars)
	}
	if r.FactsOf(a) != nil {
		t.Error("FactsOf of a module that sets no facts is not nil")
	}
}

// TestCheckData: a saved plan's Data is read as its module declares it,
// before Apply would read it; a module that declares none has its Data
// carried as it is; and Data must make a new value.
func TestCheckData(t *testing.T) {
	type state struct {
		Cmd []string `json:"cmd"`
	}
	typed := &module.Registration{Name: "typed", Module: stub{plain}, Data: func() any { return new(state) }}
	for _, c := range []struct {
		data, want string
	}{
		{`{"cmd":["true"]}`, ""},
		{``, ""},
		{`{"cmd":["true"],"extra":1}`, `unknown field "extra"`},
		{`{"cmd":"true"}`, "cannot unmarshal"},
		{`{"cmd":[]} {}`, "more than one JSON value"},
	} {
		err := typed.CheckData(&module.Plan{Data: []byte(c.data)})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckData(%s) = %v, want %q", c.data, err, c.want)
		}
	}
	opaque := &module.Registration{Name: "opaque", Module: stub{plain}}
	if err := opaque.CheckData(&module.Plan{Data: []byte(`"anything"`)}); err != nil {
		t.Errorf("a module without a Data type: %v", err)
	}
	if got := registerErr(module.Registration{Name: "reg_data", Module: stub{plain}, Data: func() any { return state{} }}); !strings.Contains(got, "Data must return a pointer") {
		t.Errorf("Data returning a value: %q", got)
	}
}
