package playbook

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/inputs"
	"nodeconverge/engine/jinja"
	"nodeconverge/engine/module"
	"nodeconverge/engine/transport"
	"nodeconverge/engine/yamlx"
)

var varNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// template parses a template of t's arguments or loop as Jinja2
// (engine/jinja: syntax, filters and tests; variables are checked when it
// renders), records the variables it reads and keeps it for Render, which
// renders it on every host without parsing it again.
func (l *loader) template(t *Task, s string) (*jinja.Template, error) {
	tpl, err := jinja.Parse(s)
	if err != nil {
		return nil, err
	}
	if t.templates == nil {
		t.templates = map[string]*jinja.Template{}
	}
	t.templates[s] = tpl
	t.argNames = append(t.argNames, tpl.Names()...)
	return tpl, nil
}

// maxNodes bounds the rendered argument tree, which aliases to large
// anchors could otherwise multiply without limit.
const maxNodes = 100000

type renderer struct {
	file  string
	vars  map[string]any
	nodes int
	// templates are the task's templates parsed at load (Task.templates).
	templates map[string]*jinja.Template
	// shellKeys are the top-level argument names whose substitutions are
	// shell-quoted (shellArgs), top the argument mapping they are keys of
	// (aliases followed); quote is set while rendering one.
	shellKeys map[string]bool
	top       *yaml.Node
	quote     bool
}

// LoopArgs are the arguments of a task with a loop: one module.Args per
// item, each rendered with the item as `item`.
type LoopArgs struct {
	Items  []any         `json:"items"`
	Args   []module.Args `json:"-"`
	Module string        `json:"module"`
}

// Validate: each item's arguments were validated when rendered.
func (a *LoopArgs) Validate() error { return nil }

// Render renders a task's arguments for one host: for a task with a loop,
// its items and one module.Args per item (*LoopArgs).
func (t *Task) Render(vars map[string]any) (module.Args, error) {
	if t.Loop == nil {
		return t.render(vars)
	}
	items, err := t.items(vars)
	if err != nil {
		return nil, err
	}
	out := &LoopArgs{Items: []any{}, Module: t.Module}
	// An unknown module never gets past t.render below.
	m, _ := module.Lookup(t.Module)
	// set_fact in a loop: each item sees the facts the earlier items
	// set (`x: "{{ x + [item] }}"` accumulates), as in Ansible.
	var facts map[string]any
	per := t.itemVars()
	for i, it := range items {
		lv := map[string]any{t.LoopVar(): it}
		if t.indexVar != "" {
			lv[t.indexVar] = i
		}
		iv := MergeVars(vars, facts, lv)
		if per != nil {
			if iv, err = t.withItemVars(iv, per); err != nil {
				return nil, err
			}
		}
		if t.WhenPerItem() {
			// Ansible decides a loop's when: per item.
			ok, _, err := Holds(t.When, iv)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out.Items = append(out.Items, it)
		a, err := t.render(iv)
		if err != nil {
			return nil, err
		}
		if f := m.FactsOf(a); f != nil {
			facts = MergeVars(facts, f)
		}
		out.Args = append(out.Args, a)
	}
	return out, nil
}

// LoopVar is the name each item of the task's loop is bound to: item,
// or loop_control's loop_var.
func (t *Task) LoopVar() string {
	if t.loopVar != "" {
		return t.loopVar
	}
	return "item"
}

// WhenPerItem says the task's when: is decided per item of its loop (it
// reads the loop variable), not once per host.
func (t *Task) WhenPerItem() bool {
	if t.Loop == nil {
		return false
	}
	for _, c := range t.When {
		for _, n := range c.Expr.Names() {
			if n == t.LoopVar() {
				return true
			}
		}
	}
	return false
}

// Holds evaluates conditions (all must be true, as a list of when: is);
// when one is false or cannot be evaluated it is returned with the
// answer, the error at its place.
func Holds(conds []*Cond, vars map[string]any) (bool, *Cond, error) {
	for _, c := range conds {
		ok, err := c.Expr.Truth(vars)
		if err != nil {
			return false, c, &Error{Pos: c.Pos, Msg: fmt.Sprintf("the condition %q could not be evaluated: %v", c.Src, err)}
		}
		if !ok {
			return false, c, nil
		}
	}
	return true, nil, nil
}

// items evaluates the task's loop on a host.
func (t *Task) items(vars map[string]any) ([]any, error) {
	r := &renderer{file: t.Pos.File, vars: vars, templates: t.templates}
	n, err := r.subst(t.Loop, 0)
	if err != nil {
		return nil, err
	}
	v, err := yamlx.DecodeValue(n)
	if err != nil {
		return nil, nodeErr(t.Pos.File, t.Loop, "loop: %v", err)
	}
	if t.firstFound {
		// with_first_found: one item, the first of the files that
		// exists on the task's search path.
		terms, ok := v.([]any)
		if !ok {
			terms = []any{v}
		}
		found, err := jinja.FirstFound(terms, t.searchDirs, t.Module)
		if err != nil {
			return nil, nodeErr(t.Pos.File, t.Loop, "with_first_found: %v", err)
		}
		return found, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, nodeErr(t.Pos.File, t.Loop, "loop: %s is not a list", jinja.Text(v))
	}
	if t.flatten {
		var flat []any
		for _, it := range list {
			if sub, ok := it.([]any); ok {
				flat = append(flat, sub...)
			} else {
				flat = append(flat, it)
			}
		}
		list = flat
	}
	return list, nil
}

// render substitutes vars into the task's arguments, decodes them over the
// module's defaults and validates them. A value that is exactly one
// "{{ name }}" keeps the variable's type (an int stays an int, a list a
// list); text around a reference makes the result a string. Render does not
// modify the task, so hosts can render it concurrently.
func (t *Task) render(vars map[string]any) (module.Args, error) {
	if t.Meta != "" {
		// The runner does a meta: task itself; it has no arguments.
		return nil, nil
	}
	m, ok := module.Lookup(t.Module)
	if !ok {
		return nil, &Error{Pos: t.Pos, Msg: fmt.Sprintf("%s: unknown module %q", taskLabel(t), t.Module)}
	}
	var n *yaml.Node
	if t.Args != nil {
		rv := vars
		if _, ok := vars["omit"]; !ok {
			rv = MergeVars(vars, map[string]any{"omit": OmitToken})
		}
		r := &renderer{file: t.Pos.File, vars: rv, templates: t.templates, shellKeys: shellArgs(m), top: yamlx.Deref(t.Args)}
		var err error
		if n, err = r.subst(t.Args, 0); err != nil {
			return nil, err
		}
		n = dropOmitted(n, 0)
	}
	args, err := t.decode(m, n, vars)
	if err != nil || len(t.Environment) == 0 {
		return args, err
	}
	env, err := t.environment(vars)
	if err != nil {
		return nil, err
	}
	if len(env) > 0 {
		m.GiveEnvironment(args, env)
	}
	return args, nil
}

// environment renders the task's environment: on a host: each layer, a
// mapping or a template that gives one, the later winning per name.
func (t *Task) environment(vars map[string]any) (map[string]string, error) {
	out := map[string]string{}
	for _, layer := range t.Environment {
		r := &renderer{file: t.Pos.File, vars: vars, templates: t.templates}
		n, err := r.subst(layer, 0)
		if err != nil {
			return nil, err
		}
		v, err := yamlx.DecodeValue(n)
		if err != nil {
			return nil, nodeErr(t.Pos.File, layer, "environment: %v", err)
		}
		if v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nodeErr(t.Pos.File, layer, "environment: %s is not a mapping of names to values", jinja.Text(v))
		}
		for k, x := range m {
			if !varNameRe.MatchString(k) {
				return nil, nodeErr(t.Pos.File, layer, "environment: %q is not a variable name", k)
			}
			out[k] = jinja.Text(x)
		}
	}
	return out, nil
}

// OmitToken is the value of Ansible's omit: an argument that renders to
// it is left out, as if the task had not given it (`mode: "{{ m |
// default(omit) }}"`).
const OmitToken = "__omit_place_holder__nodeconverge"

// dropOmitted removes the mapping entries and list items whose rendered
// value is OmitToken.
func dropOmitted(n *yaml.Node, depth int) *yaml.Node {
	if n == nil || depth > 100 {
		return n
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := n.Content[:0:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := n.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Value == OmitToken {
				continue
			}
			out = append(out, n.Content[i], dropOmitted(v, depth+1))
		}
		n.Content = out
	case yaml.SequenceNode:
		out := n.Content[:0:0]
		for _, v := range n.Content {
			if v.Kind == yaml.ScalarNode && v.Value == OmitToken {
				continue
			}
			out = append(out, dropOmitted(v, depth+1))
		}
		n.Content = out
	}
	return n
}

// decode decodes arguments (nil: none given) over m's defaults and
// validates them: at load for arguments without a template (vars nil),
// and for every host at render.
func (t *Task) decode(m *module.Registration, n *yaml.Node, vars map[string]any) (module.Args, error) {
	args := m.NewArgs()
	if n != nil {
		if err := decodeArgs(t.Pos.File, n, args); err != nil {
			return nil, prefixErr(err, fmt.Sprintf("%s: %s: ", taskLabel(t), t.Module))
		}
	}
	// Relative paths in arguments (copy's src) start at the playbook's
	// directory, as in Ansible, not at wherever the command was run.
	if t.Pos.File != "" {
		m.GiveBaseDir(args, filepath.Dir(t.Pos.File))
	}
	if len(t.searchDirs) > 0 {
		m.GiveSearchPath(args, t.searchDirs)
	}
	// A module that renders files of its own (template) gets the host's
	// variables; none at load.
	m.GiveVars(args, vars)
	if err := args.Validate(); err != nil {
		return nil, &Error{Pos: t.Pos, Msg: fmt.Sprintf("%s: %s: %v", taskLabel(t), t.Module, err)}
	}
	return args, nil
}

// subst returns a substituted copy of n; n itself is never changed.
func (r *renderer) subst(n *yaml.Node, depth int) (*yaml.Node, error) {
	r.nodes++
	if r.nodes > maxNodes || depth > 100 {
		return nil, nodeErr(r.file, n, "arguments too large or too deeply nested (aliases included)")
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, nodeErr(r.file, n, "alias to an undefined anchor")
		}
		return r.subst(n.Alias, depth+1)
	}
	c := *n
	c.Anchor = ""
	if n.Kind == yaml.ScalarNode {
		if !jinja.Has(n.Value) {
			return &c, nil
		}
		return r.scalar(n)
	}
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, ch := range n.Content {
		// The value of a top-level shell argument renders with quoting.
		q := n == r.top && isShellArg(r.shellKeys, n, i)
		r.quote = r.quote || q
		s, err := r.subst(ch, depth+1)
		if q {
			r.quote = false
		}
		if err != nil {
			return nil, err
		}
		c.Content[i] = s
	}
	return &c, nil
}

func (r *renderer) scalar(n *yaml.Node) (*yaml.Node, error) {
	tpl, ok := r.templates[n.Value]
	if !ok {
		// Not seen at load: a task built without the loader.
		var err error
		if tpl, err = jinja.Parse(n.Value); err != nil {
			return nil, nodeErr(r.file, n, "%v", err)
		}
	}
	if r.quote {
		// Shell text: each substitution is one quoted word.
		out, err := tpl.Quoted(r.vars, transport.ShellQuote)
		if err != nil {
			return nil, r.renderErr(n, err)
		}
		return typedText(n, out), nil
	}
	v, err := tpl.Value(r.vars)
	if err != nil {
		return nil, r.renderErr(n, err)
	}
	return r.valueNode(n, v)
}

// renderErr places a template's error at its node and suggests the
// nearest variable for an undefined one.
func (r *renderer) renderErr(n *yaml.Node, err error) error {
	msg := err.Error()
	var je *jinja.Error
	if errors.As(err, &je) && je.Undefined != "" {
		msg += quotedSuggestion(je.Undefined, keysOf(r.vars))
	}
	return nodeErr(r.file, n, "%s", msg)
}

// typedText makes a scalar whose YAML type follows its text, so "80" can
// fill an int argument as Ansible's argument coercion would; text that
// would read as null stays a string.
func typedText(at *yaml.Node, s string) *yaml.Node {
	out := &yaml.Node{Kind: yaml.ScalarNode, Value: s, Line: at.Line, Column: at.Column}
	if out.ShortTag() == "!!null" {
		out.Tag = "!!str"
	}
	return out
}

func (r *renderer) valueNode(at *yaml.Node, v any) (*yaml.Node, error) {
	if s, ok := v.(string); ok {
		return typedText(at, s), nil
	}
	var out yaml.Node
	if err := out.Encode(v); err != nil {
		return nil, nodeErr(r.file, at, "cannot use the value of %s here: %v", at.Value, err)
	}
	setPos(&out, at.Line, at.Column, 0)
	return &out, nil
}

func setPos(n *yaml.Node, line, col, depth int) {
	if depth > 100 {
		return
	}
	n.Line, n.Column = line, col
	for _, c := range n.Content {
		setPos(c, line, col, depth+1)
	}
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func quotedSuggestion(word string, candidates []string) string {
	if s := yamlx.Suggest(word, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// MergeVars merges var layers, later layers winning per top-level name
// (Ansible's default hash_behaviour=replace). The runner calls
// MergeVars(host.Vars, play.Vars, extraVars). The layers are not modified.
func MergeVars(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		for k, v := range l {
			out[k] = v
		}
	}
	return out
}

// ParseExtraVars parses -e values as ansible-playbook does: "@file.yaml"
// reads a YAML or JSON mapping from a file; a value starting with "{" is a
// YAML/JSON mapping; anything else is one or more key=value words whose
// values stay strings; "name: value" without any "=" is read as a YAML
// mapping. Later values win.
func ParseExtraVars(kvs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, kv := range kvs {
		s := strings.TrimSpace(kv)
		switch {
		case strings.HasPrefix(s, "@"):
			path := s[1:]
			data, err := inputs.ReadFile(path, "vars file", inputs.MaxVarsFile)
			if err != nil {
				return nil, fmt.Errorf("-e %s: read extra vars: %w", kv, err)
			}
			m, err := mappingVars(path, data)
			if err != nil {
				return nil, err
			}
			for k, v := range m {
				out[k] = v
			}
		case strings.HasPrefix(s, "{"):
			m, err := mappingVars("-e", []byte(s))
			if err != nil {
				return nil, err
			}
			for k, v := range m {
				out[k] = v
			}
		case !strings.Contains(s, "=") && strings.Contains(s, ":"):
			// A block-style YAML mapping ("a: 1"), which Ansible would
			// refuse; accepted because it is unambiguous.
			m, err := mappingVars("-e", []byte(s))
			if err != nil {
				return nil, err
			}
			for k, v := range m {
				out[k] = v
			}
		default:
			words := yamlx.ShellWords(s)
			if len(words) == 0 {
				return nil, fmt.Errorf("-e %q: expected key=value, @file.yaml or a {…} mapping", kv)
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return nil, fmt.Errorf("-e %q: %q is not key=value", kv, w)
				}
				if !varNameRe.MatchString(k) {
					return nil, fmt.Errorf("-e %q: %q is not a valid variable name", kv, k)
				}
				out[k] = v
			}
		}
	}
	return out, nil
}

func mappingVars(file string, data []byte) (map[string]any, error) {
	doc, err := parseYAML(file, data)
	if err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return map[string]any{}, nil
	}
	root := yamlx.Deref(doc.Content[0])
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, nodeErr(file, doc.Content[0], "extra vars must be a mapping of names to values, got %s", yamlx.KindName(root))
	}
	for i := 0; i < len(root.Content); i += 2 {
		k := yamlx.Deref(root.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode || (!varNameRe.MatchString(k.Value) && k.Value != "<<") {
			return nil, nodeErr(file, root.Content[i], "extra vars: variable name must be a word of letters, digits and _, got %s", yamlx.KindName(k))
		}
	}
	v, err := decodeValue(file, root)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("extra vars must be a mapping")
	}
	return m, nil
}
