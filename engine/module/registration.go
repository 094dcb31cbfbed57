package module

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"

	"nodeconverge/engine/transport"
)

// This file is the whole module contract beyond Module's three methods
// (NewArgs, Check, Apply): everything a module may state about itself, and
// everything the playbook loader and the runner do with it. A module is
// registered once, from its package's init, with one Registration; the
// loader and the runner read what a module can do from its Registration and
// never guess it from a type assertion (engine/arch checks that). In the
// spirit of containerd's plugin.Registration: the registration is data the
// engine reads, not an interface it probes.
//
// Adding a module is one folder under modules/ holding the Module, its Args
// and an init that calls Register, and one blank import in modules/all.
// What Check and Apply exchange and return (Plan, Result, a
// ValidationError for a blocked write, an error that is Proven) is in
// module.go.
//
// An example: a module that reads ahead, has two names and carries its own
// state from Check to Apply:
//
//	func init() {
//		module.Register(module.Registration{Name: "sysctl", Aliases: []string{"ansible.posix.sysctl"},
//			Module: Module{}, Prefetch: Module{}.Prefetch, Data: func() any { return new(data) }})
//	}
//
// What is not here, because the engine does not drive it: ctrconf.Declarer
// (modules/containerd/ctrconf), implemented by a module whose tasks declare
// containerd settings, which only `nodeconverge explain --playbook`
// (engine/app) asks for.

// Registration is everything the engine knows about one module. Only Name
// and Module are required; every other field is a capability, off when
// zero.
type Registration struct {
	// Name is what a task calls the module (`sysctl:`); a task may also
	// write it with the ansible.builtin. prefix.
	Name string
	// Aliases are further names for the same module (ansible.posix.sysctl,
	// systemd_service).
	Aliases []string
	// Module is the module itself: NewArgs, Check, Apply.
	Module

	// --- What the loader does with the task's arguments.

	// Inputs are what the loader hands the module's Args beyond the keys
	// the task wrote, each through the setter the flag names (see Inputs).
	// Register refuses a statement that does not match the Args' methods.
	Inputs Inputs
	// ShellArgs are top-level arguments that are shell text (shell's cmd):
	// in them every {{ }} substitution is inserted as one shell-quoted
	// word, so a value from an inventory or a variable is data even inside
	// a script: it can never become shell syntax.
	ShellArgs []string
	// ExprArgs are top-level arguments that are bare Jinja2 expressions,
	// as when: is (assert's that, debug's var): the loader parses them at
	// load, so a syntax error names its file:line:col, and counts the
	// variables they read as the task's, so a task whose expression reads
	// a registered result is decided when the host reaches it. The module
	// evaluates them in Check with the host's variables (InputVars).
	ExprArgs []string
	// SetsFacts says the module's top-level argument names, but those in
	// FactReserved, are the names of variables it sets on the host
	// (set_fact): the loader records them on the task, so a later task
	// that reads one is decided when the host reaches it, after the fact
	// is set; a templated name is refused at load. Its Args implement
	// FactsArgs, and its plans carry the values in Plan.Facts.
	SetsFacts bool
	// FactReserved are the arguments of a SetsFacts module that are not
	// variable names (set_fact's cacheable).
	FactReserved []string
	// Unsupported are arguments of Ansible's module of the same name that
	// this one does not take, each with what to do instead: the loader
	// says it where a task gives one, rather than a closest name.
	Unsupported map[string]string
	// Retries says a task of the module may carry until: (with retries:
	// and delay:): the runner runs it again until the condition holds, as
	// Ansible's task executor does. Only a module whose plan is an action
	// (command, shell) states it; a converge module checks and applies
	// once, and the loader refuses until: on it.
	Retries bool

	// --- How the runner treats its plans.

	// Imperative says running the module's plan does not make the next
	// Check come back empty and what it did cannot be foreseen (command,
	// shell, containerd_restart): the runner does not re-check it after
	// applying it, plans the rest of the play again before the next write,
	// and a saved step of it is not re-checked either.
	Imperative bool
	// ImperativePlan, for a module only some of whose plans are
	// imperative (file's state: touch changes the times on every run, as
	// in Ansible; a service restart), says whether p is one: the runner
	// does not re-check it after applying it.
	ImperativePlan func(p *Plan) bool
	// Prefetch, for a module that knows from its arguments alone what its
	// Check will read, returns that query: the runner merges the queries of
	// every task of a play into one round trip per host before the first
	// task, and the Host (engine/node) answers the tasks' own Queries from
	// what it read.
	Prefetch func(args Args) transport.Query
	// Prove, for a module that can prove the running node without
	// changing a file (containerd_restart: a pod sandbox through every
	// runtime), returns its proofs: `apply --check --prove` calls it on
	// every host the play reaches, whether or not the module would run,
	// and `explain` calls it with the module's default arguments; h can
	// start and remove a sandbox but cannot write a file.
	Prove func(ctx context.Context, h transport.Prover, args Args, o ProveOptions) ([]Proof, error)
	// Restore, for a module whose Apply, cut short part way (the run
	// interrupted past its grace), can leave a service down (a restart
	// between its stop and its start), brings the service up: the runner
	// calls it after rolling the host back, under a fresh bounded context,
	// and reports the state it returns ("containerd active").
	Restore func(ctx context.Context, h transport.Writer, p *Plan) (string, error)

	// --- What its plans carry.

	// Data, for a module whose plans carry state of its own from Check to
	// Apply in Plan.Data (the commands Apply runs, the keys to set live),
	// returns a pointer to a new zero value of that state's type. The state
	// must survive JSON: a saved plan is applied by a later process. Before
	// a saved plan touches a host, the runner decodes each of its steps'
	// Data into this type, refusing a field the type does not have
	// (CheckData), so a plan its Apply could not read refuses the host with
	// the step named instead of failing part way through it. A module
	// without Data has its Data carried as it is.
	Data func() any
}

// Inputs are the things beyond a task's own keys that a module's Args take
// from the loader, one flag each; the Args implement the setter the flag
// names, and the loader calls it after decoding the task's keys and before
// Validate.
type Inputs uint8

// The inputs a module's Args may take.
const (
	// InputBaseDir: the directory of the file the task was written in,
	// where relative paths in its arguments start (copy's src), as in
	// Ansible; a saved plan hands the directory it was made with.
	// Through BaseDirArgs.
	InputBaseDir Inputs = 1 << iota
	// InputSearchPath: a role task's search path for relative paths
	// (the role's files/ or templates/ first). Through SearchPathArgs.
	InputSearchPath
	// InputVars: the host's variables (nil at load), for a module that
	// renders a file of its own (template) or evaluates expressions
	// (ExprArgs). Every templated variable is resolved for it, since the
	// file may read any. Through VarsArgs.
	InputVars
	// InputEnvironment: the task's rendered environment: keyword, when
	// it has one. Through EnvironmentArgs.
	InputEnvironment
)

// BaseDirArgs are the Args of a module that takes InputBaseDir.
type BaseDirArgs interface {
	Args
	SetBaseDir(dir string)
}

// SearchPathArgs are the Args of a module that takes InputSearchPath.
type SearchPathArgs interface {
	Args
	SetSearchPath(dirs []string)
}

// VarsArgs are the Args of a module that takes InputVars.
type VarsArgs interface {
	Args
	SetVars(vars map[string]any)
}

// EnvironmentArgs are the Args of a module that takes InputEnvironment.
type EnvironmentArgs interface {
	Args
	SetEnvironment(env map[string]string)
}

// FactsArgs are the Args of a module that SetsFacts: Facts are the
// variables these arguments set, so a loop's later items see the facts its
// earlier items set.
type FactsArgs interface {
	Args
	Facts() map[string]any
}

// GiveBaseDir hands a, made by r's NewArgs, the directory relative paths
// start at, if r takes InputBaseDir.
func (r *Registration) GiveBaseDir(a Args, dir string) {
	if b, ok := a.(BaseDirArgs); ok && r.Inputs&InputBaseDir != 0 {
		b.SetBaseDir(dir)
	}
}

// GiveSearchPath hands a its role search path, if r takes InputSearchPath.
func (r *Registration) GiveSearchPath(a Args, dirs []string) {
	if s, ok := a.(SearchPathArgs); ok && r.Inputs&InputSearchPath != 0 {
		s.SetSearchPath(dirs)
	}
}

// GiveVars hands a the host's variables, if r takes InputVars.
func (r *Registration) GiveVars(a Args, vars map[string]any) {
	if v, ok := a.(VarsArgs); ok && r.Inputs&InputVars != 0 {
		v.SetVars(vars)
	}
}

// GiveEnvironment hands a the task's environment, if r takes
// InputEnvironment.
func (r *Registration) GiveEnvironment(a Args, env map[string]string) {
	if e, ok := a.(EnvironmentArgs); ok && r.Inputs&InputEnvironment != 0 {
		e.SetEnvironment(env)
	}
}

// FactsOf are the variables a sets on its host; nil unless r SetsFacts.
func (r *Registration) FactsOf(a Args) map[string]any {
	if f, ok := a.(FactsArgs); ok && r.SetsFacts {
		return f.Facts()
	}
	return nil
}

// CheckData decodes p's Data into r's Data type, as Apply will read it,
// and refuses a field the type does not have; nil when r states no Data
// type or p carries none.
func (r *Registration) CheckData(p *Plan) error {
	if r.Data == nil || len(p.Data) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(p.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r.Data()); err != nil {
		return fmt.Errorf("plan data: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("plan data: more than one JSON value")
	}
	return nil
}

var (
	mu       sync.RWMutex
	registry = map[string]*Registration{}
)

// Register makes a module available to playbooks under its name and
// aliases. Modules call it from init. It panics, so the binary does not
// start, on a name taken twice and on a registration that does not say
// what the module implements (a method the engine would call, present on
// the module or its Args but not stated, or stated but missing): a
// capability is never silently lost.
func Register(r Registration) {
	if err := r.check(); err != nil {
		panic(fmt.Sprintf("module %q: %v", r.Name, err))
	}
	mu.Lock()
	defer mu.Unlock()
	reg := &r
	for _, n := range append([]string{r.Name}, r.Aliases...) {
		if _, dup := registry[n]; dup {
			panic(fmt.Sprintf("module %q registered twice", n))
		}
		registry[n] = reg
	}
}

// check compares what r states with the methods its module and its Args
// have.
func (r *Registration) check() error {
	if r.Name == "" || r.Module == nil {
		return fmt.Errorf("a registration needs a name and a module")
	}
	var errs []string
	stated := func(what string, says, has bool) {
		switch {
		case has && !says:
			errs = append(errs, fmt.Sprintf("implements %s, which the registration does not state", what))
		case says && !has:
			errs = append(errs, fmt.Sprintf("states %s, which it does not implement", what))
		}
	}
	a := r.NewArgs()
	_, has := a.(BaseDirArgs)
	stated("SetBaseDir (InputBaseDir)", r.Inputs&InputBaseDir != 0, has)
	_, has = a.(SearchPathArgs)
	stated("SetSearchPath (InputSearchPath)", r.Inputs&InputSearchPath != 0, has)
	_, has = a.(VarsArgs)
	stated("SetVars (InputVars)", r.Inputs&InputVars != 0, has)
	_, has = a.(EnvironmentArgs)
	stated("SetEnvironment (InputEnvironment)", r.Inputs&InputEnvironment != 0, has)
	_, has = a.(FactsArgs)
	stated("Facts (SetsFacts)", r.SetsFacts, has)
	if r.Data != nil {
		if d := reflect.ValueOf(r.Data()); d.Kind() != reflect.Pointer || d.IsNil() {
			errs = append(errs, "Data must return a pointer to a new value")
		}
	}
	if len(r.FactReserved) > 0 && !r.SetsFacts {
		errs = append(errs, "names FactReserved but does not set facts")
	}
	// A method of the module's named like a capability is one its author
	// meant the engine to call: the Registration must point at it.
	for _, c := range []struct {
		method string
		says   bool
	}{
		{"Prefetch", r.Prefetch != nil},
		{"ImperativePlan", r.ImperativePlan != nil},
		{"Prove", r.Prove != nil},
		{"Restore", r.Restore != nil},
		{"Imperative", r.Imperative},
	} {
		if _, has := reflect.TypeOf(r.Module).MethodByName(c.method); has && !c.says {
			errs = append(errs, fmt.Sprintf("has a method %s, which the registration does not state", c.method))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Lookup returns the registration of the module registered under name (its
// name or an alias).
func Lookup(name string) (*Registration, bool) {
	mu.RLock()
	defer mu.RUnlock()
	r, ok := registry[name]
	return r, ok
}

// Names lists every registered name and alias, sorted, for suggestions and
// help.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// All lists every registration once, by name.
func All() []*Registration {
	mu.RLock()
	defer mu.RUnlock()
	seen := map[*Registration]bool{}
	var out []*Registration
	for _, r := range registry {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
