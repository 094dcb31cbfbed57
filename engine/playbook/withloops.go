package playbook

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"nodeconverge/engine/jinja"
	"nodeconverge/engine/yamlx"
)

// The with_ lookups node-prep roles use most are read as the loop they
// are, through the filter that gives the same items:
//
//	with_dict: "{{ d }}"                 loop: "{{ (d) | dict2items }}"
//	with_subelements: ["{{ l }}", key]   loop: "{{ (l) | subelements('key') }}"
//
// (a third with_subelements term {skip_missing: true} passes skip_missing).
// with_dict also takes a literal mapping, read as its key/value items.
// Ansible's with_ lookups also template a bare variable name; nodeconverge
// asks for the template instead, saying so.

// withLoop is the loop: node of a with_dict or with_subelements task.
func (l *loader) withLoop(key string, n *yaml.Node) (*yaml.Node, error) {
	v := yamlx.Deref(n)
	scalar := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Line: n.Line, Column: n.Column}
	}
	switch key {
	case "with_dict":
		if v != nil && v.Kind == yaml.MappingNode {
			seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: v.Line, Column: v.Column}
			for i := 0; i+1 < len(v.Content); i += 2 {
				seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: v.Content[i].Line, Column: v.Content[i].Column,
					Content: []*yaml.Node{scalar("key"), v.Content[i], scalar("value"), v.Content[i+1]}})
			}
			return seq, nil
		}
		e, err := l.wholeExpr(key, n)
		if err != nil {
			return nil, err
		}
		return scalar("{{ (" + e + ") | dict2items }}"), nil
	case "with_subelements":
		if v == nil || v.Kind != yaml.SequenceNode || len(v.Content) < 2 || len(v.Content) > 3 {
			return nil, nodeErr(l.file, n, "with_subelements takes a list of two terms, the list and the name of each item's sublist (and optionally {skip_missing: true})")
		}
		e, err := l.wholeExpr(key, v.Content[0])
		if err != nil {
			return nil, err
		}
		sub := yamlx.Deref(v.Content[1])
		if sub == nil || sub.Kind != yaml.ScalarNode || jinja.Has(sub.Value) || strings.ContainsAny(sub.Value, `'\`) {
			return nil, nodeErr(l.file, v.Content[1], "with_subelements: the second term is the plain name of each item's sublist")
		}
		args := fmt.Sprintf("'%s'", sub.Value)
		if len(v.Content) == 3 {
			skip := false
			flags := yamlx.Deref(v.Content[2])
			if flags == nil || flags.Kind != yaml.MappingNode {
				return nil, nodeErr(l.file, v.Content[2], "with_subelements: the third term is a mapping ({skip_missing: true})")
			}
			for i := 0; i+1 < len(flags.Content); i += 2 {
				k := yamlx.Deref(flags.Content[i])
				if k == nil || k.Value != "skip_missing" {
					return nil, nodeErr(l.file, flags.Content[i], "with_subelements: the only flag is skip_missing")
				}
				b, err := l.boolean(flags.Content[i+1], "with_subelements skip_missing")
				if err != nil {
					return nil, err
				}
				skip = b
			}
			if skip {
				args += ", skip_missing=True"
			}
		}
		return scalar("{{ (" + e + ") | subelements(" + args + ") }}"), nil
	}
	return nil, nodeErr(l.file, n, "%s is not a loop nodeconverge reads", key)
}

// wholeExpr is the expression of a term that is one whole template
// ("{{ expr }}").
func (l *loader) wholeExpr(key string, n *yaml.Node) (string, error) {
	v := yamlx.Deref(n)
	if v != nil && v.Kind == yaml.ScalarNode {
		s := strings.TrimSpace(v.Value)
		if strings.HasPrefix(s, "{{") && strings.HasSuffix(s, "}}") {
			inner := strings.TrimSpace(s[2 : len(s)-2])
			if inner != "" && !strings.Contains(inner, "{{") && !strings.Contains(inner, "}}") {
				if _, err := jinja.ParseExpr(inner); err != nil {
					return "", nodeErr(l.file, n, "%s: %v", key, err)
				}
				return inner, nil
			}
		}
		if !jinja.Has(v.Value) && varNameRe.MatchString(s) {
			return "", nodeErr(l.file, n, "%s: %q: write the variable as a template, \"{{ %s }}\" (a bare name is the old form Ansible itself warns about)", key, v.Value, s)
		}
	}
	return "", nodeErr(l.file, n, "%s takes one template that gives the value (\"{{ var }}\"), got %s", key, yamlx.KindName(v))
}
