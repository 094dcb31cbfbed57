package playbook

import (
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/module"
	"nodeconverge/engine/yamlx"
)

// Ansible's older form of module arguments is one string of key=value
// words (`file: path=/etc/sysctl.d state=directory`, or a folded
// `sysctl: >` block of them). For a module without a free-form command
// (command and shell keep theirs) the string is read as Ansible's
// parse_kv reads it: words split on blanks outside quotes and outside
// {{ }}, {% %} and {# #}; each word is KEY=VALUE, the value unquoted
// when it is wholly quoted. A word without = is an error at its line.
// Values are strings, as Ansible's are before the module converts them
// ("yes" becomes a boolean argument, "0644" stays the mode it reads).

// kvArgs is the mapping a key=value string gives, or modVal unchanged
// when it is not such a string for such a module.
func (l *loader) kvArgs(t *Task, modVal *yaml.Node) (*yaml.Node, error) {
	v := yamlx.Deref(modVal)
	if v == nil || v.Kind != yaml.ScalarNode || yamlx.IsNull(v) {
		return modVal, nil
	}
	m, ok := module.Lookup(t.Module)
	if !ok {
		return modVal, nil
	}
	if _, free := argFields(reflect.TypeOf(m.NewArgs()))["cmd"]; free {
		return modVal, nil
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: v.Line, Column: v.Column}
	for _, w := range splitKV(v.Value) {
		k, val, ok := cutKV(w)
		if !ok || k == "" {
			return nil, nodeErr(l.file, modVal, "%s: %s: arguments as a string are key=value words, and %q is not one (or write them as a mapping)", taskLabel(t), t.Module, w)
		}
		out.Content = append(out.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: v.Line, Column: v.Column},
			&yaml.Node{Kind: yaml.ScalarNode, Value: unquoteKV(val), Line: v.Line, Column: v.Column})
	}
	if len(out.Content) == 0 {
		return modVal, nil
	}
	return out, nil
}

// splitKV splits s on blanks outside quotes and Jinja2 blocks, as
// Ansible's split_args does for key=value strings.
func splitKV(s string) []string {
	var out []string
	var cur strings.Builder
	var quote byte
	depth := 0
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(s) {
				cur.WriteByte(c)
				i++
				c = s[i]
			} else if c == quote {
				quote = 0
			}
		case depth == 0 && (c == '\'' || c == '"'):
			quote = c
		case i+1 < len(s) && c == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#'):
			depth++
			cur.WriteByte(c)
			i++
			c = s[i]
		case depth > 0 && i+1 < len(s) && (c == '}' || c == '%' || c == '#') && s[i+1] == '}':
			depth--
			cur.WriteByte(c)
			i++
			c = s[i]
		case depth == 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			flush()
			continue
		}
		cur.WriteByte(c)
	}
	flush()
	return out
}

// cutKV splits a word at its first = outside quotes and Jinja2 blocks.
func cutKV(w string) (string, string, bool) {
	var quote byte
	depth := 0
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case i+1 < len(w) && c == '{' && (w[i+1] == '{' || w[i+1] == '%'):
			depth++
			i++
		case depth > 0 && i+1 < len(w) && (c == '}' || c == '%') && w[i+1] == '}':
			depth--
			i++
		case depth == 0 && c == '=':
			return w[:i], w[i+1:], true
		}
	}
	return "", "", false
}

// unquoteKV strips one pair of matching quotes around the whole value, as
// Ansible's unquote does.
func unquoteKV(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
