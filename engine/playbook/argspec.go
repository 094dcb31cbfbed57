package playbook

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/inputs"
	"nodeconverge/engine/yamlx"
)

// A role whose meta/argument_specs.yml (or the argument_specs key of its
// meta/main.yml) describes the entry point it is entered by (tasks_from,
// "main" by default) gets, as in Ansible 2.11 and later, one more task
// before its own: "Validating arguments against arg spec 'ENTRY' -
// SHORT_DESCRIPTION", tagged always. It counts in the recap as Ansible's
// validate_argument_spec task does (ok), and fails the host when an option
// the spec marks required is undefined or one with choices has a value
// outside them. Ansible also checks and converts each option's type; that
// part is not done (an option of the wrong type reaches the role's tasks,
// where a module or a condition refuses it).

// argSpecOption is a plain option name, the only kind a condition can read.
var argSpecOption = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// argSpecTask is the validation task of entry in the role at dir, nil when
// the role has no spec for it.
func (l *loader) argSpecTask(dir, entry string) []*Task {
	if entry == "" {
		entry = "main"
	}
	file, spec := l.argSpec(dir, entry)
	if spec == nil {
		return nil
	}
	pos := func(n *yaml.Node) (int, int) { return n.Line, n.Column }
	line, col := pos(spec)
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Line: line, Column: col}
	}
	name := fmt.Sprintf("Validating arguments against arg spec '%s'", entry)
	var that []*yaml.Node
	if v := yamlx.Deref(spec); v.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, x := yamlx.Deref(v.Content[i]), yamlx.Deref(v.Content[i+1])
			switch k.Value {
			case "short_description":
				if x.Kind == yaml.ScalarNode {
					name += " - " + x.Value
				}
			case "options":
				that = append(that, argSpecConditions(x, str)...)
			}
		}
	}
	if len(that) == 0 {
		that = append(that, str("true"))
	}
	task := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line, Column: col, Content: []*yaml.Node{
		str("name"), str(name),
		str("tags"), {Kind: yaml.SequenceNode, Tag: "!!seq", Line: line, Column: col, Content: []*yaml.Node{str("always")}},
		str("assert"), {Kind: yaml.MappingNode, Tag: "!!map", Line: line, Column: col, Content: []*yaml.Node{
			str("that"), {Kind: yaml.SequenceNode, Tag: "!!seq", Line: line, Column: col, Content: that},
			str("quiet"), {Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true", Line: line, Column: col},
		}},
	}}
	saved := l.file
	l.file = file
	defer func() { l.file = saved }()
	if t := l.task(task, false); t != nil {
		return []*Task{t}
	}
	return nil
}

// argSpecConditions are the conditions an options mapping asks for: each
// required option is defined, each option with choices is one of them.
func argSpecConditions(opts *yaml.Node, str func(string) *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	if opts == nil || opts.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(opts.Content); i += 2 {
		k, o := yamlx.Deref(opts.Content[i]), yamlx.Deref(opts.Content[i+1])
		if k == nil || !argSpecOption.MatchString(k.Value) || o == nil || o.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(o.Content); j += 2 {
			key, val := yamlx.Deref(o.Content[j]), yamlx.Deref(o.Content[j+1])
			switch {
			case key.Value == "required" && val.Kind == yaml.ScalarNode && isTrue(val.Value):
				out = append(out, str(k.Value+" is defined"))
			case key.Value == "choices" && val.Kind == yaml.SequenceNode:
				var lits []string
				for _, c := range val.Content {
					if c := yamlx.Deref(c); c.Kind == yaml.ScalarNode {
						lits = append(lits, fmt.Sprintf("%q", choiceText(c)))
					}
				}
				// A list option's value is checked element by element,
				// as Ansible's _validate_argument_values does.
				in := "[" + strings.Join(lits, ", ") + "]"
				out = append(out, str(fmt.Sprintf("%s is not defined or (%s | string) in %s or (%s is not string and %s is iterable and %s is not mapping and (%s | map('string') | reject('in', %s) | list | length == 0))",
					k.Value, k.Value, in, k.Value, k.Value, k.Value, k.Value, in)))
			}
		}
	}
	return out
}

// choiceText is a choice as the value it matches reads through the string
// filter: a boolean of PyYAML's (Ansible's YAML: true, yes, on and their
// opposites, any case) as Python prints True and False, anything else as
// written.
func choiceText(c *yaml.Node) string {
	if c.Style == 0 && c.Tag != "!!str" {
		switch strings.ToLower(c.Value) {
		case "true", "yes", "on":
			return "True"
		case "false", "no", "off":
			return "False"
		}
	}
	return c.Value
}

// isTrue is YAML 1.1's true, as Ansible reads the spec.
func isTrue(s string) bool {
	switch strings.ToLower(s) {
	case "true", "yes", "on", "y":
		return true
	}
	return false
}

// argSpec finds the spec of entry: meta/argument_specs.yml first (Ansible
// reads it before meta/main.yml's argument_specs key).
func (l *loader) argSpec(dir, entry string) (string, *yaml.Node) {
	for _, p := range []string{mainFile(filepath.Join(dir, "meta"), "argument_specs"), mainFile(filepath.Join(dir, "meta"), "")} {
		if p == "" {
			continue
		}
		data, err := inputs.ReadFile(p, "role argument spec", inputs.MaxVarsFile)
		if err != nil {
			l.add(&Error{Pos: Pos{File: p, Line: 1, Col: 1}, Msg: err.Error()})
			return "", nil
		}
		doc, err := parseYAML(p, data)
		if err != nil {
			l.add(err)
			return "", nil
		}
		if len(doc.Content) == 0 {
			continue
		}
		specs := mapValue(yamlx.Deref(doc.Content[0]), "argument_specs")
		if specs == nil {
			continue
		}
		if s := mapValue(specs, entry); s != nil {
			return p, s
		}
		return "", nil
	}
	return "", nil
}

// mapValue is the value of key in mapping m, nil when m is no mapping or
// has no such key.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := yamlx.Deref(m.Content[i]); k != nil && k.Value == key {
			return yamlx.Deref(m.Content[i+1])
		}
	}
	return nil
}
