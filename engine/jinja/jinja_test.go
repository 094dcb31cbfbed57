package jinja

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var vars = map[string]any{
	"name":    "gpu01",
	"port":    8080,
	"flag":    "yes",
	"off":     "false",
	"list":    []any{"a", "b", 3},
	"empty":   []any{},
	"m":       map[string]any{"k": "v", "n": 2},
	"result":  map[string]any{"rc": 0, "stdout": "ok\nsecond", "changed": true, "failed": false},
	"hostile": "$(reboot); `id` 'q'",
	"ver":     "1.7.13",
}

func render(t *testing.T, src string) string {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	out, err := tpl.Render(vars)
	if err != nil {
		t.Fatalf("Render(%q): %v", src, err)
	}
	return out
}

func TestFilters(t *testing.T) {
	for src, want := range map[string]string{
		"{{ name }}":                              "gpu01",
		"{{ missing | default('x') }}":            "x",
		"{{ missing | d('y') }}":                  "y",
		"{{ flag | bool }}":                       "True",
		"{{ off | bool }}":                        "False",
		"{{ '42' | int + 1 }}":                    "43",
		"{{ port | string }}":                     "8080",
		"{{ list | join(',') }}":                  "a,b,3",
		"{{ 'ABC' | lower }}-{{ 'abc' | upper }}": "abc-ABC",
		"{{ name | regex_replace('^gpu(\\\\d+)$', 'node\\\\1') }}": "node01",
		"{{ m | to_json }}":                        `{"k":"v","n":2}`,
		"{{ list | to_yaml }}":                     "- a\n- b\n- 3\n",
		"{{ '  x ' | trim }}":                      "x",
		"{{ list | length }}":                      "3",
		"{{ 'a-b' | replace('-', '_') }}":          "a_b",
		"{{ result.stdout.splitlines() | first }}": "ok",
		"{{ (port > 80) | ternary('hi', 'lo') }}":  "hi",
		"{{ '/etc/x/y.conf' | basename }}":         "y.conf",
		// Ansible's own output (ansible.plugins.filter.core.comment, 2.14).
		"{{ 'Ansible managed' | comment }}":                       "#\n# Ansible managed\n#",
		"{{ 'Ansible managed' | comment('c') }}":                  "//\n// Ansible managed\n//",
		"{{ 'a\nb' | comment(decoration='; ') }}":                 ";\n; a\n; b\n;",
		"{{ 'x' | comment('xml') }}":                              "<!--\n -\n - x\n -\n-->",
		"{{ 'x' | comment('cblock') }}":                           "/*\n *\n * x\n *\n */",
		"{{ 'a\n\nb' | comment }}":                                "#\n# a\n#\n# b\n#",
		"{{ m | dict2items | map(attribute='key') | join(',') }}": "k,n",
		"{% for x in list %}[{{ x }}]{% endfor %}\n":              "[a][b][3]\n",
		"{% if result is changed %}c{% endif %}":                  "c",
		"{{ ver is version('1.7', '>=') }}":                       "True",
		"{{ hostile | quote }}":                                   `'$(reboot); ` + "`id`" + ` '"'"'q'"'"''`,
	} {
		if got := render(t, src); got != want {
			t.Errorf("%s = %q, want %q", src, got, want)
		}
	}
}

func TestValueKeepsType(t *testing.T) {
	tpl, err := Parse("{{ list }}")
	if err != nil {
		t.Fatal(err)
	}
	v, err := tpl.Value(vars)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{"a", "b", 3}, v); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	tpl, _ = Parse("x{{ port }}")
	if v, _ := tpl.Value(vars); v != "x8080" {
		t.Errorf("text around: %#v", v)
	}
}

// TestUnknownFilterAtParse: an unknown filter or test is an error at
// parse, with its place and the nearest name.
func TestUnknownFilterAtParse(t *testing.T) {
	_, err := Parse("a\n{{ name | lowre }}")
	var je *Error
	if !errors.As(err, &je) || !strings.Contains(err.Error(), `unknown filter "lowre" (did you mean lower?)`) || je.Line != 2 || je.Col != 11 {
		t.Errorf("err = %v", err)
	}
	if _, err := Parse("{% if x is frobbed %}{% endif %}"); err == nil || !strings.Contains(err.Error(), `unknown test "frobbed"`) {
		t.Errorf("unknown test: %v", err)
	}
	if _, err := Parse("{{ 1 + }}"); err == nil || !strings.Contains(err.Error(), "template syntax") {
		t.Errorf("syntax: %v", err)
	}
}

func TestUndefined(t *testing.T) {
	tpl, _ := Parse("{{ nope }}")
	if _, err := tpl.Render(vars); err == nil || err.Error() != `undefined variable "nope"` {
		t.Errorf("undefined: %v", err)
	}
	tpl, _ = Parse("{{ m.zz }}")
	if _, err := tpl.Render(vars); err == nil || !strings.Contains(err.Error(), `"zz"`) {
		t.Errorf("missing key: %v", err)
	}
}

// TestValuesAreData: a substituted value is never parsed again, and
// Quoted makes each substitution one quoted word.
func TestValuesAreData(t *testing.T) {
	tpl := mustParse(t, "{{ x }}")
	out, err := tpl.Render(map[string]any{"x": "{{ name }}{% if 1 %}y{% endif %}"})
	if err != nil || out != "{{ name }}{% if 1 %}y{% endif %}" {
		t.Errorf("re-parsed: %q %v", out, err)
	}
	tpl = mustParse(t, "echo {{ hostile }} > /var/lib/{{ name }}")
	out, err = tpl.Quoted(vars, func(s string) string { return "<" + s + ">" })
	if err != nil || out != "echo <$(reboot); `id` 'q'> > /var/lib/<gpu01>" {
		t.Errorf("Quoted = %q, %v", out, err)
	}
	tpl = mustParse(t, "{% if flag %}rm -rf /{% endif %}")
	if _, err := tpl.Quoted(vars, func(s string) string { return s }); err == nil {
		t.Error("Quoted accepted a block tag")
	}
}

func TestExpr(t *testing.T) {
	for src, want := range map[string]bool{
		"result.rc == 0": true,
		"result is changed and not result.failed": true,
		"flag | bool":               true,
		"off | bool":                false,
		"'second' in result.stdout": true,
		"missing is defined":        false,
		"missing is not defined":    true,
		"empty":                     false,
		"list | length > 2":         true,
		"{{ port == 8080 }}":        true,
		"name == 'gpu01' or nope":   true,
	} {
		e, err := ParseExpr(src)
		if err != nil {
			t.Errorf("ParseExpr(%q): %v", src, err)
			continue
		}
		got, err := e.Truth(vars)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got != want {
			t.Errorf("%s = %v, want %v", src, got, want)
		}
	}
	e, err := ParseExpr("result.rc == 0 and x.y")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"result", "x"}, e.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	if _, err := e.Truth(vars); err == nil || !strings.Contains(err.Error(), `undefined variable "x"`) {
		t.Errorf("undefined in when: %v", err)
	}
	if _, err := ParseExpr("x | nosuch"); err == nil || !strings.Contains(err.Error(), "unknown filter") {
		t.Errorf("unknown filter in when: %v", err)
	}
}

func TestAttrs(t *testing.T) {
	tpl, err := Parse(`{{ ansible_facts.os_family }} {{ ansible_facts['distribution'] | lower }} {{ x[y] }} {{ ansible_facts.os_family }}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := tpl.Attrs("ansible_facts"); strings.Join(got, ",") != "os_family,distribution" {
		t.Errorf("Attrs(ansible_facts) = %v", got)
	}
	if got := tpl.Attrs("x"); len(got) != 0 {
		t.Errorf("Attrs(x) = %v: a key read from a variable is not a literal", got)
	}
	e, err := ParseExpr(`ansible_facts['machine_id'] is defined`)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Attrs("ansible_facts"); len(got) != 1 || got[0] != "machine_id" {
		t.Errorf("Expr.Attrs = %v", got)
	}
}

func TestSubelements(t *testing.T) {
	tpl, err := Parse(`{{ users | subelements('keys.list') | map('last') | list }} {{ users | subelements('x', skip_missing=True) | length }}`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(map[string]any{"users": []any{
		map[string]any{"name": "a", "keys": map[string]any{"list": []any{"k1", "k2"}}},
		map[string]any{"name": "b", "keys": map[string]any{"list": []any{"k3"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out != "['k1', 'k2', 'k3'] 0" {
		t.Errorf("subelements: %q", out)
	}
}

func TestLookup(t *testing.T) {
	t.Setenv("NC_LOOKUP_TEST", "from env")
	for src, want := range map[string]string{
		`{{ lookup('env', 'NC_LOOKUP_TEST') }}`:                   "from env",
		`{{ lookup('env', 'NC_LOOKUP_UNSET') }}|`:                 "|",
		`{{ lookup('ansible.builtin.env', 'NC_LOOKUP_TEST') }}`:   "from env",
		`{{ lookup('vars', 'pre' ~ '_x') }}`:                      "value",
		`{{ lookup('vars', 'nope', default='d') }}`:               "d",
		`{{ query('vars', 'pre_x', 'other') | length }}`:          "2",
		`{{ lookup('env', 'NC_LOOKUP_TEST', 'NC_LOOKUP_TEST') }}`: "from env,from env",
	} {
		tpl, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := tpl.Render(map[string]any{"pre_x": "value", "other": 1})
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
	for _, src := range []string{`{{ lookup('vars', 'nope') }}`, `{{ lookup('pipe', 'id') }}`} {
		tpl, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tpl.Render(map[string]any{}); err == nil {
			t.Errorf("%s rendered", src)
		}
	}
}

// mustParse parses src, failing the test when it does not parse.
func mustParse(t *testing.T, src string) *Template {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return tpl
}
