// Package set_fact is Ansible's `set_fact`: it sets variables on the host
// for the rest of the run, above play and task vars (Ansible's set_fact
// precedence). The names are known at load (a template as a name is
// refused), so the runner knows which later tasks read them; the values
// are rendered with the host's variables. Strings "true", "false", "yes"
// and "no" become booleans, as Ansible's set_fact makes them. `cacheable`
// is accepted: a run keeps no fact cache, so within the run it changes
// nothing. It reads and changes nothing on the node.
package set_fact

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
)

func init() {
	module.Register(module.Registration{Name: "set_fact", Module: Module{}, SetsFacts: true, FactReserved: []string{"cacheable"}})
}

// Args are the facts to set, and cacheable.
type Args struct {
	Values    map[string]any `yaml:",inline"`
	Cacheable bool           `yaml:"cacheable"`
}

// UnmarshalYAML reads the facts. A plain scalar that reads as a number is
// one only in its canonical form ("80", "1.5"): a "0644" or "1.20", which
// is what a template such as "{{ st.stat.mode }}" renders to, stays the
// string it is, as Ansible's set_fact keeps it.
func (a *Args) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: set_fact takes a mapping of names to values", n.Line)
	}
	a.Values = map[string]any{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "cacheable" {
			if err := v.Decode(&a.Cacheable); err != nil {
				return err
			}
			continue
		}
		var x any
		if err := v.Decode(&x); err != nil {
			return err
		}
		if v.Kind == yaml.ScalarNode && v.Style == 0 && v.Tag != "!!int" && v.Tag != "!!float" {
			switch num := x.(type) {
			case int:
				if strconv.Itoa(num) != v.Value {
					x = v.Value
				}
			case float64:
				if strconv.FormatFloat(num, 'f', -1, 64) != v.Value {
					x = v.Value
				}
			}
		}
		a.Values[k.Value] = x
	}
	return nil
}

// Validate checks there is something to set.
func (a *Args) Validate() error {
	if len(a.Values) == 0 {
		return errors.New("no key/value pairs provided, at least one is required for this action to succeed")
	}
	return nil
}

// Facts are the variables the task sets, with Ansible's reading of
// boolean words.
func (a *Args) Facts() map[string]any {
	out := make(map[string]any, len(a.Values))
	for k, v := range a.Values {
		if s, ok := v.(string); ok {
			switch strings.ToLower(s) {
			case "true", "yes":
				v = true
			case "false", "no":
				v = false
			}
		}
		out[k] = v
	}
	return out
}

// Module implements module.Module for set_fact.
type Module struct{}

// NewArgs returns empty arguments.
func (Module) NewArgs() module.Args { return &Args{} }

// Check sets the facts in the plan.
func (Module) Check(_ context.Context, _ transport.Reader, margs module.Args) (*module.Plan, error) {
	return &module.Plan{Facts: margs.(*Args).Facts()}, nil
}

// Apply is never called: the plan is always empty.
func (Module) Apply(context.Context, transport.Writer, *module.Plan) (*module.Result, error) {
	return &module.Result{}, nil
}
