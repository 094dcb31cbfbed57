// Package jinja evaluates the Jinja2 of playbooks: `{{ }}` templates in
// module arguments and template files, and the bare expressions of
// `when:`, `changed_when:` and `failed_when:`. It wraps
// github.com/nikolalohinski/gonja/v2, a Go implementation of Jinja2, and
// adds the Ansible filters and tests playbooks use most (bool,
// regex_replace, to_json, to_yaml, ternary, is changed, is version...).
//
// Everything that can be checked without variables is checked at Parse:
// syntax, and that every filter and test exists (an unknown filter is an
// error at load, not on the first host). Undefined variables are errors,
// as in Ansible, unless a filter such as default handles them.
//
// A value substituted is data: the result of a template is never parsed
// again as a template, and Quoted renders each substitution through a
// quoting function (the shell module's cmd), so a value can never become
// syntax.
package jinja

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"

	"nodeconverge/engine/yamlx"
)

// Error is a problem in a template or expression, at a line and column of
// its source (1-based; 0 when unknown).
type Error struct {
	Line, Col int
	Msg       string
	// Undefined is the variable a render read and nothing defines, when
	// that is the problem, so a caller can suggest a defined one.
	Undefined string
}

// Error formats the problem, with its place when the source has several
// lines or the column says something.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (template line %d, column %d)", e.Msg, e.Line, e.Col)
	}
	return e.Msg
}

var (
	envOnce sync.Once
	env     *exec.Environment
)

// environment is gonja's built-ins plus the Ansible filters and tests.
func environment() *exec.Environment {
	envOnce.Do(func() {
		// Update adds a set's entries over the others: an Ansible filter
		// or test of the same name as a built-in replaces it.
		env = &exec.Environment{
			Context: exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables).
				Update(exec.NewContext(map[string]any{"lookup": lookup, "query": query, "q": query})),
			Filters: exec.NewFilterSet(map[string]exec.FilterFunction{}).
				Update(builtins.Filters).Update(exec.NewFilterSet(ansibleFilters)),
			Tests: exec.NewTestSet(map[string]exec.TestFunction{}).
				Update(builtins.Tests).Update(exec.NewTestSet(ansibleTests)),
			ControlStructures: builtins.ControlStructures,
			Methods:           builtins.Methods,
		}
	})
	return env
}

// Filters lists every filter a template may use, sorted.
func Filters() []string {
	var out []string
	for _, n := range allFilterNames() {
		if environment().Filters.Exists(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Options change how a template renders.
type Options struct {
	// TrimBlocks removes the first newline after a block tag, as
	// Ansible's template module does by default.
	TrimBlocks bool
	// Dir is where {% include %} and {% import %} find files; empty
	// refuses them.
	Dir string
}

func newConfig(o Options) *config.Config {
	c := config.New()
	c.StrictUndefined = true
	c.KeepTrailingNewline = true
	c.TrimBlocks = o.TrimBlocks
	return c
}

// Template is a parsed template. It is safe for concurrent use.
type Template struct {
	src    string
	cfg    *config.Config
	loader loaders.Loader
	tpl    *exec.Template
	// single is the expression when the whole source is one {{ }}: its
	// value keeps its type (a list stays a list).
	single nodes.Expression
	names  []string
	// attrs are, per variable, the attributes and literal keys read
	// directly off it (x.a, x['a']): ansible_facts.os_family.
	attrs map[string][]string
}

// Has reports whether s holds Jinja syntax at all.
func Has(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "{%") || strings.Contains(s, "{#")
}

// Parse parses a template and checks that every filter and test it uses
// exists.
func Parse(src string) (*Template, error) { return ParseWith(src, Options{}) }

// ParseWith parses a template with options. The conditional expressions
// inside its {{ }} are rewritten first (ternary.go: gonja parses them
// only as a whole {{ }}, and reads `f(x if c else y)` as a variable named
// if); when the rewritten template does not parse, the template as
// written is parsed, and its error is the one returned.
func ParseWith(src string, o Options) (*Template, error) {
	// A raw block's {{ }} is text, never rewritten.
	if strings.Contains(src, "if") && !strings.Contains(src, "raw") {
		if alt, ok := rewriteTemplate(src); ok {
			if t, err := parseWith(alt, o); err == nil {
				t.src = src
				return t, nil
			}
		}
	}
	return parseWith(src, o)
}

func parseWith(src string, o Options) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, &Error{Msg: fmt.Sprintf("invalid template: %v", r)}
		}
	}()
	cfg := newConfig(o)
	var base loaders.Loader = noLoader{}
	if o.Dir != "" {
		if base, err = loaders.NewFileSystemLoader(o.Dir); err != nil {
			return nil, fmt.Errorf("template directory %s: %w", o.Dir, err)
		}
	}
	shifted, err := loaders.NewShiftedLoader("template", strings.NewReader(src), base)
	if err != nil {
		return nil, fmt.Errorf("load template: %w", err)
	}
	tpl, err := exec.NewTemplate("template", cfg, shifted, environment())
	if err != nil {
		return nil, syntaxErr(err)
	}
	t = &Template{src: src, cfg: cfg, loader: shifted, tpl: tpl}
	if err := t.check(); err != nil {
		return nil, err
	}
	if root := tpl.Root(); root != nil && len(root.Nodes) == 1 {
		if out, ok := root.Nodes[0].(*nodes.Output); ok && out.Condition == nil {
			t.single = out.Expression
		}
	}
	return t, nil
}

// syntaxErr turns gonja's parse error into an Error with its place.
func syntaxErr(err error) error {
	var se *parser.SyntaxError
	if errors.As(err, &se) {
		msg := se.Message
		if se.Raw != "" {
			msg += fmt.Sprintf(" (near %q)", se.Raw)
		}
		return &Error{Line: se.Line, Col: se.Column, Msg: "template syntax: " + msg}
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, "': "); i >= 0 && strings.HasPrefix(msg, "failed to parse template '") {
		msg = msg[i+3:]
	}
	return &Error{Msg: "template syntax: " + msg}
}

// check walks the parsed template: every filter and test must exist, and
// it records the variable names it reads.
func (t *Template) check() error {
	var problems []error
	seen := map[string]bool{}
	walk(reflect.ValueOf(t.tpl.Root()), map[uintptr]bool{}, func(n any) {
		switch x := n.(type) {
		case *nodes.FilterCall:
			if !environment().Filters.Exists(x.Name) {
				problems = append(problems, &Error{Line: x.Token.Line, Col: x.Token.Col,
					Msg: fmt.Sprintf("unknown filter %q%s", x.Name, yamlx.DidYouMean(x.Name, Filters()))})
			}
		case *nodes.TestCall:
			if !environment().Tests.Exists(x.Name) {
				problems = append(problems, &Error{Line: x.Token.Line, Col: x.Token.Col, Msg: fmt.Sprintf("unknown test %q", x.Name)})
			}
		case *nodes.Name:
			if n := x.Name.Val; !seen[n] {
				seen[n] = true
				t.names = append(t.names, n)
			}
		case *nodes.GetAttribute:
			if nm, ok := x.Node.(*nodes.Name); ok && x.Attribute != "" {
				t.addAttr(nm.Name.Val, x.Attribute)
			}
		case *nodes.GetItem:
			if nm, ok := x.Node.(*nodes.Name); ok {
				if k, ok := x.Arg.(*nodes.String); ok {
					t.addAttr(nm.Name.Val, k.Val)
				}
			}
		}
	})
	return errors.Join(problems...)
}

// walk calls f on every node reachable from v.
func walk(v reflect.Value, seen map[uintptr]bool, f func(any)) {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			walk(v.Elem(), seen, f)
		}
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		if v.Type() == reflect.TypeOf(&tokens.Token{}) {
			return
		}
		if v.CanInterface() {
			f(v.Interface())
		}
		walk(v.Elem(), seen, f)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				walk(v.Field(i), seen, f)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walk(v.Index(i), seen, f)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			walk(v.MapIndex(k), seen, f)
		}
	}
}

func (t *Template) addAttr(name, attr string) {
	if t.attrs == nil {
		t.attrs = map[string][]string{}
	}
	for _, a := range t.attrs[name] {
		if a == attr {
			return
		}
	}
	t.attrs[name] = append(t.attrs[name], attr)
}

// Attrs are the attributes and literal keys the template reads directly
// off the variable name (`x.a`, `x['a']`), in order of first use: which
// facts `ansible_facts.os_family` reads is known at load.
func (t *Template) Attrs(name string) []string { return append([]string(nil), t.attrs[name]...) }

// Names are the variable names the template reads (and names it binds
// itself, such as a for loop's variable), in order of first use.
func (t *Template) Names() []string { return append([]string(nil), t.names...) }

// Render renders the template to text.
func (t *Template) Render(vars map[string]any) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &Error{Msg: fmt.Sprintf("template failed: %v", r)}
		}
	}()
	s, err := t.tpl.ExecuteToString(exec.NewContext(vars))
	if err != nil {
		return "", renderErr(err)
	}
	return s, nil
}

// Value renders the template keeping the type of a value that is the
// whole template ("{{ ports }}" gives the list); anything else is text.
func (t *Template) Value(vars map[string]any) (any, error) {
	if t.single == nil {
		return t.Render(vars)
	}
	return t.eval(t.single, vars)
}

// Quoted renders the template with every substitution passed through
// quote: literal text is kept, each {{ }} becomes quote(its text). Block
// tags ({% %}) are refused: what they would emit could not be quoted as
// one value.
func (t *Template) Quoted(vars map[string]any, quote func(string) string) (string, error) {
	if err := t.Plain(); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, n := range t.tpl.Root().Nodes {
		switch x := n.(type) {
		case *nodes.Data:
			b.WriteString(dataText(x))
		case *nodes.Output:
			var v any
			var err error
			if x.Condition != nil {
				// An inline if: the renderer decides which side.
				v, err = renderOne(t, x, vars)
			} else {
				v, err = t.eval(x.Expression, vars)
			}
			if err != nil {
				return "", err
			}
			b.WriteString(quote(Text(v)))
		}
	}
	return b.String(), nil
}

// Plain says whether the template is only text and {{ }} (and comments),
// which Quoted needs.
func (t *Template) Plain() error {
	for _, n := range t.tpl.Root().Nodes {
		switch n.(type) {
		case *nodes.Data, *nodes.Output, *nodes.Comment:
		default:
			return &Error{Msg: "block tags ({% %}) are not supported here: each {{ }} is inserted as one quoted word; compute the value in vars"}
		}
	}
	return nil
}

func renderOne(t *Template, out *nodes.Output, vars map[string]any) (string, error) {
	var b strings.Builder
	r := exec.NewRenderer(t.envWith(vars), &b, t.cfg, t.loader, t.tpl)
	if _, err := r.Visit(out); err != nil {
		return "", renderErr(err)
	}
	return b.String(), nil
}

// dataText is literal text as the renderer would write it.
func dataText(n *nodes.Data) string {
	out := n.Data.Val
	if n.RemoveFirstLineReturn {
		out = strings.TrimPrefix(strings.TrimPrefix(out, "\r\n"), "\n")
	}
	if n.Trim.Left {
		out = strings.TrimLeft(out, " \r\n\t")
	}
	if n.Trim.Right {
		out = strings.TrimRight(out, " \r\n\t")
	}
	return out
}

func (t *Template) envWith(vars map[string]any) *exec.Environment {
	e := environment()
	return &exec.Environment{
		Context:           e.Context.Inherit().Update(exec.NewContext(vars)),
		Filters:           e.Filters,
		Tests:             e.Tests,
		ControlStructures: e.ControlStructures,
		Methods:           e.Methods,
	}
}

func (t *Template) eval(x nodes.Expression, vars map[string]any) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &Error{Msg: fmt.Sprintf("expression failed: %v", r)}
		}
	}()
	ev := &exec.Evaluator{Config: t.cfg, Environment: t.envWith(vars), Loader: t.loader}
	v := ev.Eval(x)
	if v.IsError() {
		return nil, renderErr(errors.New(v.Error()))
	}
	return native(v), nil
}

// native is a gonja value as plain Go data.
func native(v *exec.Value) any {
	if v == nil || v.IsNil() {
		return nil
	}
	return v.ToGoSimpleType(false)
}

var noiseRe = regexp.MustCompile(`(?i)(unable to execute template: |Unable to render expression at line \d+: [^:]*: |unable to evaluate filter &\{[^}]*\}: |filtered_expression\([^)]*\): )`)

// renderErr words gonja's render errors for a playbook's reader: the
// undefined variable or the failing filter, without the wrapping.
func renderErr(err error) error {
	msg := noiseRe.ReplaceAllString(err.Error(), "")
	if m := undefinedRe.FindStringSubmatch(msg); m != nil {
		return &Error{Msg: fmt.Sprintf("undefined variable %q", m[1]), Undefined: m[1]}
	}
	if m := attrRe.FindStringSubmatch(msg); m != nil {
		parent := strings.TrimSuffix(m[1], "."+m[2])
		msg = fmt.Sprintf("undefined variable %q: %s has no key %q", m[1], parent, m[2])
	}
	return &Error{Msg: msg}
}

var (
	undefinedRe = regexp.MustCompile(`Unable to evaluate name "([^"]+)"`)
	attrRe      = regexp.MustCompile(`Unable to evaluate ([^:]+): attribute '([^']+)' not found`)
)

// Expr is a parsed bare expression (a when: condition).
type Expr struct {
	t *Template
}

// ParseExpr parses a bare Jinja2 expression such as
// `result.rc == 0 and not (x | bool)`. A condition written as a template
// ("{{ x }}"), which Ansible warns about, is taken as its expression.
func ParseExpr(src string) (*Expr, error) {
	s := strings.TrimSpace(src)
	if strings.HasPrefix(s, "{{") && strings.HasSuffix(s, "}}") && strings.Count(s, "{{") == 1 {
		s = strings.TrimSpace(s[2 : len(s)-2])
	}
	if s == "" {
		return nil, &Error{Msg: "empty expression"}
	}
	if strings.Contains(s, "{{") || strings.Contains(s, "{%") {
		return nil, &Error{Msg: "a condition is a bare expression: write it without {{ }}"}
	}
	t, err := Parse("{{ " + s + " }}")
	if err != nil {
		var je *Error
		if errors.As(err, &je) && je.Line == 1 && je.Col > 3 {
			je.Col -= 3
		}
		return nil, err
	}
	if t.single == nil {
		return nil, &Error{Msg: fmt.Sprintf("%q is not one expression", src)}
	}
	return &Expr{t: t}, nil
}

// Names are the variable names the expression reads.
func (e *Expr) Names() []string { return e.t.Names() }

// Attrs are the attributes read directly off name (Template.Attrs).
func (e *Expr) Attrs(name string) []string { return e.t.Attrs(name) }

// Eval evaluates the expression.
func (e *Expr) Eval(vars map[string]any) (any, error) { return e.t.Value(vars) }

// Truth evaluates the expression as a condition, with Python's truth
// (empty strings, lists and mappings, 0 and none are false) and
// Ansible's for strings that name booleans ("false", "no").
func (e *Expr) Truth(vars map[string]any) (bool, error) {
	v, err := e.Eval(vars)
	if err != nil {
		return false, err
	}
	return Truth(v), nil
}

// Truth is Python's truth of a value, with Ansible's reading of boolean
// words in strings (a when: of "{{ flag }}" where flag is "false").
func Truth(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "", "false", "no", "off", "0", "n", "f":
			return false
		}
		return true
	case int:
		return x != 0
	case int64:
		return x != 0
	case float64:
		return x != 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array, reflect.String:
		return rv.Len() > 0
	}
	return true
}

// Text is a value as a template writes it inside a larger string:
// scalars as they read, lists and mappings as JSON (Python's repr would
// say ['a'], which nothing on a node reads).
func Text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		if t {
			return "True"
		}
		return "False"
	case int, int64, uint64, float64, int32, float32:
		return fmt.Sprint(t)
	}
	return toJSON(v, false)
}

// noLoader refuses {% include %} and friends in argument templates.
type noLoader struct{}

// Read refuses.
func (noLoader) Read(path string) (io.Reader, error) {
	return nil, fmt.Errorf("%s: include/import/extends are not supported here", path)
}

// Resolve refuses.
func (noLoader) Resolve(path string) (string, error) {
	return "", fmt.Errorf("%s: include/import/extends are not supported here", path)
}

// Inherit is another refusing loader.
func (noLoader) Inherit(string) (loaders.Loader, error) { return noLoader{}, nil }
