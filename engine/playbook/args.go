package playbook

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/jinja"
	"nodeconverge/engine/module"
	"nodeconverge/engine/yamlx"
)

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// args checks a task's module arguments as far as they can be checked
// without variables: the shape, every key against the Args struct, template
// syntax, and the types of values that hold no template. When nothing is
// templated the whole Args is decoded and validated too, so a bad task fails
// before any host is contacted.
func (l *loader) args(t *Task, modKey, val *yaml.Node) (*yaml.Node, error) {
	m, _ := module.Lookup(t.Module)
	label := taskLabel(t)
	v := yamlx.Deref(val)
	if yamlx.IsNull(v) {
		return nil, l.validateStatic(t, m, nil)
	}
	args := val
	switch v.Kind {
	case yaml.ScalarNode:
		// The free-form style of Ansible's command module: the string
		// is the command.
		args = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: v.Line, Column: v.Column, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "cmd", Line: v.Line, Column: v.Column},
			v,
		}}
		if _, ok := argFields(reflect.TypeOf(m.NewArgs()))["cmd"]; !ok {
			return nil, nodeErr(l.file, val, "%s: %s: arguments must be a mapping of argument names to values, got %s", label, t.Module, yamlx.KindName(v))
		}
	case yaml.MappingNode:
	default:
		return nil, nodeErr(l.file, val, "%s: %s: arguments must be a mapping of argument names to values, got %s", label, t.Module, yamlx.KindName(v))
	}
	// Aliases can make a small document expand enormously; bound the
	// expanded size once so every later walk is bounded too.
	count := 0
	if !withinSize(args, &count, 0) {
		return nil, nodeErr(l.file, val, "%s: %s: arguments too large or too deeply nested (aliases expanded)", label, t.Module)
	}
	// Every problem of the arguments is recorded, not only the first.
	before := len(l.errs)
	l.checkTemplates(t, args, 0, false)
	l.checkKeys(t, yamlx.Deref(args), reflect.TypeOf(m.NewArgs()), "", 0)
	a := yamlx.Deref(args)
	l.exprArgs(t, m, a)
	l.factArgs(t, m, a)
	templated := false
	for i := 0; i+1 < len(a.Content); i += 2 {
		if hasTemplate(a.Content[i+1], 0) {
			templated = true
			continue
		}
		one := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: a.Content[i : i+2]}
		if err := decodeArgs(l.file, one, m.NewArgs()); err != nil {
			l.add(prefixErr(err, fmt.Sprintf("%s: %s: argument %q: ", label, t.Module, yamlx.Deref(a.Content[i]).Value)))
		}
	}
	if len(l.errs) != before {
		return args, nil
	}
	if !templated {
		if err := l.validateStatic(t, m, args); err != nil {
			return nil, err
		}
	}
	return args, nil
}

// exprArgs parses the arguments that are bare expressions (assert's
// that, debug's var; Registration.ExprArgs) as when: is parsed, so a syntax
// error is reported at load, and counts the variables they read as the
// task's: one that reads a registered result is decided when the host
// reaches it.
func (l *loader) exprArgs(t *Task, m *module.Registration, a *yaml.Node) {
	if len(m.ExprArgs) == 0 || a == nil || a.Kind != yaml.MappingNode {
		return
	}
	keys := map[string]bool{}
	for _, k := range m.ExprArgs {
		keys[k] = true
	}
	for i := 0; i+1 < len(a.Content); i += 2 {
		k := yamlx.Deref(a.Content[i])
		if k == nil || !keys[k.Value] {
			continue
		}
		v := yamlx.Deref(a.Content[i+1])
		items := []*yaml.Node{v}
		if v != nil && v.Kind == yaml.SequenceNode {
			items = v.Content
		}
		for _, it := range items {
			s := yamlx.Deref(it)
			if s == nil || s.Kind != yaml.ScalarNode || yamlx.IsNull(s) {
				l.add(nodeErr(l.file, it, "%s: %s: %s: each item must be an expression, got %s", taskLabel(t), t.Module, k.Value, yamlx.KindName(s)))
				continue
			}
			if _, isBool := yaml11Bool(s); isBool || s.ShortTag() == "!!int" || s.ShortTag() == "!!float" {
				continue
			}
			e, err := jinja.ParseExpr(s.Value)
			if err != nil {
				l.add(nodeErr(l.file, it, "%s: %s: %s: %v", taskLabel(t), t.Module, k.Value, err))
				continue
			}
			t.argNames = append(t.argNames, e.Names()...)
		}
	}
}

// factArgs records the names of the variables a task sets on its host
// (Registration.SetsFacts: set_fact's argument names), so the runner
// decides a later task that reads one when the host reaches it.
func (l *loader) factArgs(t *Task, m *module.Registration, a *yaml.Node) {
	if !m.SetsFacts || a == nil || a.Kind != yaml.MappingNode {
		return
	}
	reserved := map[string]bool{}
	for _, k := range m.FactReserved {
		reserved[k] = true
	}
	for i := 0; i+1 < len(a.Content); i += 2 {
		k := yamlx.Deref(a.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode || reserved[k.Value] {
			continue
		}
		if jinja.Has(k.Value) {
			l.add(nodeErr(l.file, k, "%s: %s: the variable name %q is a template: nodeconverge decides which tasks read a fact before the run, so write the name out", taskLabel(t), t.Module, k.Value))
			continue
		}
		if !varNameRe.MatchString(k.Value) {
			l.add(nodeErr(l.file, k, "%s: %s: the variable name %q is not valid: variables must start with a letter or underscore character, and contain only letters, numbers and underscores", taskLabel(t), t.Module, k.Value))
			continue
		}
		t.Sets = append(t.Sets, k.Value)
	}
}

func (l *loader) validateStatic(t *Task, m *module.Registration, args *yaml.Node) error {
	_, err := t.decode(m, args, nil)
	return err
}

func prefixErr(err error, prefix string) error {
	var pe *Error
	if errors.As(err, &pe) {
		return &Error{Pos: pe.Pos, Msg: prefix + pe.Msg}
	}
	return fmt.Errorf("%s%w", prefix, err)
}

// looksLikeUnquotedTemplate spots `key: {{ x }}`, which YAML reads as a
// mapping whose key is a mapping.
func looksLikeUnquotedTemplate(v *yaml.Node) bool {
	return v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle != 0 && len(v.Content) == 2 &&
		v.Content[0].Kind == yaml.MappingNode && v.Content[0].Style&yaml.FlowStyle != 0
}

// field is one key an Args struct accepts, with the Go type it decodes
// into so nested keys can be checked too.
type field struct {
	typ reflect.Type
}

// argFields lists the YAML keys a struct accepts, following yaml.v3's
// rules: the tag's name, else the lowercased field name; "-" hides a field;
// ",inline" lifts an embedded struct's keys. An inline map accepts any key,
// reported as the key "*".
func argFields(t reflect.Type) map[string]field {
	out := map[string]field{}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		out["*"] = field{}
		return out
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Map {
				out["*"] = field{}
				continue
			}
			for k, v := range argFields(ft) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = field{typ: f.Type}
	}
	return out
}

// checkKeys walks the arguments alongside the Go type they decode into and
// rejects keys a struct does not have, at any depth. Types with their own
// UnmarshalYAML are left to it.
func (l *loader) checkKeys(t *Task, n *yaml.Node, typ reflect.Type, path string, depth int) {
	n = yamlx.Deref(n)
	if n == nil || typ == nil || depth > 50 {
		return
	}
	for typ.Kind() == reflect.Pointer {
		if typ.Implements(unmarshalerType) {
			return
		}
		typ = typ.Elem()
	}
	if typ.Implements(unmarshalerType) || reflect.PointerTo(typ).Implements(unmarshalerType) {
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		fields := argFields(typ)
		if _, open := fields["*"]; open {
			return
		}
		var names []string
		for k := range fields {
			names = append(names, k)
		}
		sort.Strings(names)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := yamlx.Deref(n.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode {
				l.add(nodeErr(l.file, n.Content[i], "%s: %s: argument names must be strings, got %s", taskLabel(t), t.Module, yamlx.KindName(k)))
				continue
			}
			if k.Value == "<<" {
				continue
			}
			f, ok := fields[k.Value]
			if !ok {
				l.add(nodeErr(l.file, k, "%s: %s: unknown argument %q%s", taskLabel(t), t.Module, path+k.Value, l.argHint(t, k.Value, names)))
				continue
			}
			l.checkKeys(t, n.Content[i+1], f.typ, path+k.Value+".", depth+1)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, it := range n.Content {
			l.checkKeys(t, it, typ.Elem(), fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i), depth+1)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := yamlx.Deref(n.Content[i])
			name := ""
			if k != nil {
				name = k.Value
			}
			l.checkKeys(t, n.Content[i+1], typ.Elem(), path+name+".", depth+1)
		}
	}
}

// argHint is what to say about an argument a module does not have: the
// nodeconverge way when the name is an Ansible argument with one, else the
// closest argument name.
func (l *loader) argHint(t *Task, name string, names []string) string {
	if m, ok := module.Lookup(t.Module); ok {
		if h, ok := m.Unsupported[name]; ok {
			return ": " + h
		}
	}
	return yamlx.DidYouMean(name, names)
}

// checkTemplates parses every template in the arguments so syntax errors
// surface at load time, not on the first host.
func (l *loader) checkTemplates(t *Task, n *yaml.Node, depth int, shell bool) {
	n = yamlx.Deref(n)
	if n == nil || depth > 100 {
		return
	}
	if looksLikeUnquotedTemplate(n) {
		l.add(nodeErr(l.file, n, "%s: %s: a value starting with {{ must be quoted, as in \"{{ name }}\"", taskLabel(t), t.Module))
		return
	}
	if n.Kind == yaml.ScalarNode {
		if !jinja.Has(n.Value) {
			return
		}
		tpl, err := l.template(t, n.Value)
		if err != nil {
			l.add(nodeErr(l.file, n, "%s: %s: %v", taskLabel(t), t.Module, err))
			return
		}
		if shell {
			if err := tpl.Plain(); err != nil {
				l.add(nodeErr(l.file, n, "%s: %s: %v", taskLabel(t), t.Module, err))
			}
		}
		return
	}
	var keys map[string]bool
	if depth == 0 {
		if m, ok := module.Lookup(t.Module); ok {
			keys = shellArgs(m)
		}
	}
	for i, c := range n.Content {
		l.checkTemplates(t, c, depth+1, shell || isShellArg(keys, n, i))
	}
}

// shellArgs are the top-level arguments of m whose substitutions are
// shell-quoted (Registration.ShellArgs); nil for any other module.
func shellArgs(m *module.Registration) map[string]bool {
	if len(m.ShellArgs) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, k := range m.ShellArgs {
		out[k] = true
	}
	return out
}

// isShellArg says whether args.Content[i], args being a task's argument
// mapping with aliases followed, is the value of one of the keys (from
// shellArgs). The load-time check and Render both ask it, so what is
// checked as shell text is what renders quoted, an aliased key included.
func isShellArg(keys map[string]bool, args *yaml.Node, i int) bool {
	if keys == nil || args.Kind != yaml.MappingNode || i%2 == 0 {
		return false
	}
	k := yamlx.Deref(args.Content[i-1])
	return k != nil && keys[k.Value]
}

func withinSize(n *yaml.Node, count *int, depth int) bool {
	n = yamlx.Deref(n)
	*count++
	if n == nil || *count > maxNodes || depth > 100 {
		return n == nil && *count <= maxNodes
	}
	for _, c := range n.Content {
		if !withinSize(c, count, depth+1) {
			return false
		}
	}
	return true
}

func hasTemplate(n *yaml.Node, depth int) bool {
	n = yamlx.Deref(n)
	if n == nil || depth > 100 {
		return false
	}
	if n.Kind == yaml.ScalarNode {
		return jinja.Has(n.Value)
	}
	for _, c := range n.Content {
		if hasTemplate(c, depth+1) {
			return true
		}
	}
	return false
}

var typeErrLineRe = regexp.MustCompile(`^line (\d+): (.*)$`)
var unmarshalRe = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")

// decodeArgs decodes n into a module's Args and rewords yaml.v3's errors,
// which carry only a line, to name file:line:col of the offending node. A
// panic in a module's own UnmarshalYAML becomes an error too.
func decodeArgs(file string, n *yaml.Node, into module.Args) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = nodeErr(file, n, "decoding arguments failed: %v", r)
		}
	}()
	derr := n.Decode(into)
	if derr == nil {
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(derr, &te) || len(te.Errors) == 0 {
		return nodeErr(file, valueNode(n), "%v", derr)
	}
	msg := te.Errors[0]
	at := valueNode(n)
	if m := typeErrLineRe.FindStringSubmatch(msg); m != nil {
		msg = m[2]
		if line, convErr := strconv.Atoi(m[1]); convErr == nil {
			if found := findLine(n, line, 0); found != nil {
				at = found
			}
		}
	}
	if m := unmarshalRe.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("wrong type: cannot use %s as %s", describeTag(m[1], m[2]), m[3])
	}
	return nodeErr(file, at, "%s", msg)
}

// valueNode is the value of a one-pair mapping, the node a single
// argument's error belongs to.
func valueNode(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		return n.Content[1]
	}
	return n
}

// findLine finds the first value node on a line, preferring values over
// keys since type errors are about values.
func findLine(n *yaml.Node, line, depth int) *yaml.Node {
	if n == nil || depth > 100 {
		return nil
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i+1].Line == line {
				return n.Content[i+1]
			}
			if f := findLine(n.Content[i+1], line, depth+1); f != nil {
				return f
			}
		}
		return nil
	}
	if n.Line == line && n.Kind != yaml.DocumentNode {
		return n
	}
	for _, c := range n.Content {
		if f := findLine(c, line, depth+1); f != nil {
			return f
		}
	}
	return nil
}

func describeTag(tag, val string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!str":
		return fmt.Sprintf("the string %q", val)
	case "!!int":
		return "the number " + val
	case "!!float":
		return "the number " + val
	case "!!bool":
		return "the boolean " + val
	case "!!null":
		return "null"
	}
	if val != "" {
		return tag + " " + val
	}
	return tag
}
